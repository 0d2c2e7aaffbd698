package escape

import (
	"os"
	"path/filepath"
	"testing"
)

// TestProcess covers research/sandbox.md §7 items 11, 29–32 and 34: the sandbox's init (PID 1,
// also the probe's parent), namespaces, the kernel interfaces the seccomp filter refuses, and
// terminal injection. Positive controls: the probe opens its own namespace file (only setns
// fails), and TestBaseline shows the harmless attempts succeeding without the sandbox.
func TestProcess(t *testing.T) {
	s := newSuite(t)
	table := []probeCase{
		// §7.30: the init and the probe's parent (the init too: it forks the probe).
		{name: "ptrace/init", bundle: "ro", probe: "ptrace", args: lit("1"), want: denied("ptrace", "EPERM")},
		// Through the zygote the parent is a zygote thread outside the PID namespace: pid 0.
		{name: "ptrace/parent", bundle: "ro", probe: "ptrace", args: lit("parent"), want: want{result: "denied", step: "ptrace", errno: "EPERM", details: []string{"pid 1 ", "pid 0 "}}},
		// Killing the init has no effect: the kernel never delivers SIGKILL to a PID namespace's init
		// from inside it, and Landlock's signal scope refuses it outright (EPERM) unless the init's
		// thread that kill(2) checks shares the probe's domain (go-landlock restricts each thread
		// on its own). Either way the init survives (the probe's parent is still 1; through the
		// zygote, a zygote thread outside the namespace: 0) and the call returns normally (the
		// envelope is OK, which call checks; PID 1's end would have ended the probe).
		{name: "kill/init-sigkill", bundle: "ro", probe: "kill", args: lit("1", "9"), want: want{step: "kill", errnos: []string{"EPERM", ""}, details: []string{"parent 1 afterwards", "parent 0 afterwards"}}},
		// A host process: not in the sandbox's PID namespace.
		{name: "kill/host-process", bundle: "ro", probe: "kill", args: func(*suite) []string { return []string{itoa(os.Getpid()), "0"} }, want: denied("kill", "ESRCH")},

		// §7.31, §7.32: leaving or creating namespaces.
		{name: "unshare/user", bundle: "ro", probe: "unshare", args: lit("user"), want: denied("unshare", "EPERM")},
		{name: "unshare/mount", bundle: "ro", probe: "unshare", args: lit("mount"), want: denied("unshare", "EPERM")},
		{name: "unshare/net", bundle: "ro", probe: "unshare", args: lit("net"), want: denied("unshare", "EPERM")},
		{name: "setns/own-netns", bundle: "ro", probe: "setns", args: lit("/proc/self/ns/net"), want: denied("setns", "EPERM")},
		{name: "setns/init-netns-file", bundle: "ro", probe: "setns", args: lit("/proc/1/ns/net"), want: denied("open", "EACCES")},
		{name: "setns/init-mntns-file", bundle: "ro", probe: "setns", args: lit("/proc/1/ns/mnt"), want: denied("open", "EACCES")},

		// §7.34: TIOCSTI without a terminal (fd 0 is not one; there is no controlling terminal)
		// and, in the tty bundle, on the pseudo-terminal that is the controlling terminal.
		{name: "tiocsti/stdin-no-tty", bundle: "ro", probe: "tiocsti", args: lit("stdin"), want: denied("ioctl TIOCSTI", "EPERM")},
		{name: "tiocsti/dev-tty-no-ctty", bundle: "ro", probe: "tiocsti", args: lit("/dev/tty"), want: denied("open", "ENXIO")},
		{name: "tiocsti/stdin-pty", bundle: "tty", ws: emptyWS, probe: "tiocsti", args: lit("stdin"), want: denied("ioctl TIOCSTI", "EPERM")},
		{name: "tiocsti/dev-tty-pty", bundle: "tty", ws: emptyWS, probe: "tiocsti", args: lit("/dev/tty"), want: denied("ioctl TIOCSTI", "EPERM")},
	}
	// Kernel interfaces the seccomp filter refuses (§6.3, §7.11, §7.29): each is called with
	// arguments that fail harmlessly or do nothing without the filter, so the EPERM is its.
	for _, sc := range []string{"io_uring_setup", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key",
		"process_vm_readv", "pidfd_getfd", "open_by_handle_at", "pivot_root", "fsopen", "personality", "iopl"} {
		table = append(table, probeCase{name: "syscall/" + sc, bundle: "ro", probe: "syscall", args: lit(sc), want: denied(sc, "EPERM")})
	}
	// clone3's flags are out of the filter's reach: ENOSYS makes libc fall back to clone.
	table = append(table, probeCase{name: "syscall/clone3", bundle: "ro", probe: "syscall", args: lit("clone3"), want: denied("clone3", "ENOSYS")})
	s.run(t, table)
}

// TestClihostState covers research/sandbox.md §7 items 25 and 36 for clihost's own files: the
// host masks its token (host.Options.Sandbox.ExtraDeny) in every sandbox, even one whose fs.read
// grants the directory holding it: the token reads as an empty file. Positive control: the file
// next to the token is readable.
func TestClihostState(t *testing.T) {
	s := newSuite(t)
	token := func(*suite) []string { return []string{filepath.Join(outside, "state", "token")} }
	s.run(t, []probeCase{
		{name: "control/sibling", bundle: "state", ws: emptyWS, probe: "read", args: out("state/other"), want: allowed("not a secret")},
		{name: "token/read", bundle: "state", ws: emptyWS, probe: "read", args: token, want: masked("read")},
		{name: "token/read-via-proc-self-root", bundle: "state", ws: emptyWS, probe: "read",
			args: func(*suite) []string { return []string{"/proc/self/root" + filepath.Join(outside, "state", "token")} }, want: masked("read")},
		{name: "token/umount-mask", bundle: "state", ws: emptyWS, probe: "umount", args: token, want: denied("umount2", "EPERM")},
		{name: "token/other-bundle", bundle: "ro", probe: "read", args: token, want: masked("read")},
	})
}
