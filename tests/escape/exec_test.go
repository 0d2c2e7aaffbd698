package escape

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// ldso is the x86-64 ELF interpreter; the ld.so cases run on amd64 only.
const ldso = "/lib64/ld-linux-x86-64.so.2"

// gitCore is an ELF program inside the runtime read set (/usr/lib) when git is installed.
const gitCore = "/usr/lib/git-core/git"

// TestExec covers research/sandbox.md §7 items 13–15 and 33: running what exec.spawn does not
// list (directly, through the ELF interpreter, from a memfd, through a script's interpreter) and
// syscalls through a foreign ABI, with positive controls (the listed binary and script run).
func TestExec(t *testing.T) {
	s := newSuite(t)
	table := []probeCase{
		// Positive controls: what exec.spawn lists runs, a #! script with its interpreter included.
		{name: "control/spawn-listed-binary", bundle: "spawn", probe: "exec", args: lit("/usr/bin/true"), want: allowed("")},
		{name: "control/spawn-listed-script", bundle: "spawn", probe: "exec", args: out("tools/ok.sh"), want: allowed("spawned ok")},

		// Unlisted programs.
		{name: "unlisted/no-exec-bundle", bundle: "ro", probe: "exec", args: lit("/usr/bin/id"), want: denied("execve", "EACCES")},
		{name: "unlisted/spawn-bundle", bundle: "spawn", probe: "exec", args: lit("/usr/bin/id"), want: denied("execve", "EACCES")},
		{name: "unlisted/interpreter-directly", bundle: "spawn", probe: "exec", args: lit("/usr/bin/perl", "/dev/null"), want: denied("execve", "EACCES")},
		// A script whose #! names an interpreter no list has, in the (noexec) workspace and next
		// to a listed script.
		{name: "shebang/workspace-script", bundle: "ro", probe: "exec", args: in(roWS, "evil.sh"), want: denied("execve", "EACCES")},
		{name: "shebang/unlisted-script-unlisted-interpreter", bundle: "spawn", probe: "exec", args: out("tools/evil.pl"), want: denied("execve", "EACCES")},

		// §7.14: write a program where the probe may write, then run it: every writable place is
		// noexec (the probe's own binary as the payload: if it ran, it would report "allowed").
		{name: "wx/sandbox-tmp", bundle: "spawn", probe: "drop-exec", args: lit("/proc/self/exe", "/tmp/dropped", "escaped", "drop-exec"), want: denied("execve", "EACCES")},
		{name: "wx/dev-shm", bundle: "spawn", probe: "drop-exec", args: lit("/proc/self/exe", "/dev/shm/dropped", "escaped", "drop-exec"), want: denied("execve", "EACCES")},
		{name: "wx/writable-workspace", bundle: "rw", ws: rwWS, probe: "drop-exec",
			args: func(s *suite) []string {
				return []string{"/proc/self/exe", filepath.Join(s.rw, "dropped"), "escaped", "drop-exec"}
			}, want: denied("execve", "EACCES"),
			after: func(t *testing.T, s *suite) { os.Remove(filepath.Join(s.rw, "dropped")) }},

		// §7.13: memfd: asking for an executable memfd, and executing a default one through
		// execveat(AT_EMPTY_PATH) or /proc/self/fd (fexecve).
		{name: "memfd/create-mfd-exec", bundle: "ro", probe: "memfd-create-exec", want: denied("memfd_create", "EPERM")},
		{name: "memfd/execveat-empty-path", bundle: "ro", probe: "memfd-execveat", want: denied("execveat", "EPERM")},
		{name: "memfd/fexecve-proc-fd", bundle: "ro", probe: "memfd-fexecve", want: denied("execve", "EACCES")},
		{name: "memfd/execveat-spawn-bundle", bundle: "spawn", probe: "memfd-execveat", want: denied("execveat", "EPERM")},
	}
	if runtime.GOARCH == "amd64" {
		table = append(table,
			// §7.13: the ELF interpreter as a loader. Where it is not executable (a static bin, no
			// spawn) it cannot start; where it is (spawn lists a dynamic binary), it starts but
			// cannot read the program, which no rule grants: it exits 127.
			probeCase{name: "ldso/not-executable", bundle: "ro", probe: "exec", args: lit(ldso, "/usr/bin/id"), want: denied("execve", "EACCES")},
			probeCase{name: "ldso/unreadable-program", bundle: "spawn", probe: "exec", args: lit(ldso, "/usr/bin/id"),
				want: want{result: "denied", step: "wait", exit: intPtr(127), detail: "Permission denied"}},
		)
		if _, err := os.Stat(gitCore); err == nil {
			table = append(table, probeCase{name: "ldso/runtime-tree-program", bundle: "spawn", probe: "exec", args: lit(ldso, gitCore, "version"),
				// A documented limit, asserted so that a change is noticed: the ELF interpreter,
				// executable for every dynamic binary, maps any readable ELF file of the read-only
				// runtime set (the kernel checks exec rights on execve, not on mmap). It gains no
				// right: the program runs in the same sandbox as the tool, which could carry the
				// same code itself. Files the tool could write are noexec (see wx/ cases).
				want: want{result: "allowed"}})
		}
		table = append(table,
			// §7.13, §7.14: a dynamic program (the listed, readable true) copied to the noexec
			// /tmp and mapped by the ELF interpreter, which execve's checks do not see.
			probeCase{name: "wx/sandbox-tmp-via-ldso", bundle: "spawn", probe: "drop-ldso", args: lit("/usr/bin/true", "/tmp/dropped-true"),
				want: want{result: "denied", step: "wait", exit: intPtr(127), detail: "failed to map segment"}},
			// §7.33: the i386 and x32 syscall ABIs kill the process (in a child of the probe).
			probeCase{name: "abi/int80-i386", bundle: "ro", probe: "int80", want: want{result: "denied", step: "int80-child", signal: "SIGSYS"}},
			probeCase{name: "abi/x32", bundle: "ro", probe: "x32", want: want{result: "denied", step: "x32-child", signal: "SIGSYS"}},
		)
	}
	s.run(t, table)
}

// TestEnv covers research/sandbox.md §7 item 15: a bundle asking for code-loading variables
// through env.pass and env.set. Lint reports every one (sandbox-env-loader, sandbox-env-refused;
// tested in manifest and cmd/clihostctl), so newSuite adds these (a shell's startup file, python's
// path, node's options) after lint, and the runtime must drop them; the harmless variables next
// to them are the positive controls.
func TestEnv(t *testing.T) {
	s := newSuite(t)
	s.run(t, []probeCase{
		{name: "control/set", bundle: "env", probe: "env", args: lit("PROBE_SET"), want: allowed("set by the bundle")},
		{name: "control/passed", bundle: "env", probe: "env", args: lit("PROBE_PASSED"), want: allowed(hostPassed)},
		{name: "bash-env", bundle: "env", probe: "env", args: lit("BASH_ENV"), want: want{result: "denied", step: "getenv", detail: "not set"}},
		{name: "pythonpath", bundle: "env", probe: "env", args: lit("PYTHONPATH"), want: want{result: "denied", step: "getenv", detail: "not set"}},
		{name: "node-options", bundle: "env", probe: "env", args: lit("NODE_OPTIONS"), want: want{result: "denied", step: "getenv", detail: "not set"}},
	})
}
