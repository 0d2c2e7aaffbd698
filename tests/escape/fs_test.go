package escape

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFilesystem covers research/sandbox.md §7 items 1–4, 6–10 and the writes outside the
// declared roots: denied and undeclared files, links, renames of masked paths, metadata changes,
// mounts, /proc magic links and writes, with positive controls (a declared file is read, a
// writable workspace is written).
func TestFilesystem(t *testing.T) {
	s := newSuite(t)
	s.run(t, []probeCase{
		// Positive controls: the same probe reads what is declared and writes where it may.
		{name: "control/read-workspace", bundle: "ro", probe: "read", args: in(roWS, "hello.txt"), want: allowed("hello from the workspace")},
		{name: "control/read-declared-absolute", bundle: "ro", probe: "read", args: out("granted/ok.txt"), want: allowed("granted")},
		{name: "control/read-runtime", bundle: "ro", probe: "read", args: lit("/etc/passwd"), want: allowed("root:")},
		{name: "control/write-writable-workspace", bundle: "rw", ws: rwWS, probe: "write", args: in(rwWS, "new.txt"), want: allowed(""),
			after: hostHas("rw", "new.txt", true)},
		{name: "control/chmod-writable-workspace", bundle: "rw", ws: rwWS, probe: "chmod", args: in(rwWS, "hello.txt"), want: allowed("")},
		{name: "control/symlink-in-workspace", bundle: "rw", ws: rwWS, probe: "symlink-read", args: in(rwWS, "hello.txt", "link-hello"), want: allowed("hello from the writable")},
		{name: "control/write-sandbox-tmp", bundle: "state", ws: emptyWS, probe: "write", args: lit("/tmp/scratch.txt"), want: allowed("")},

		// §7.1: fs.deny inside an allowed tree (a file, a dir/** and a **/ glob). A denied file
		// reads as empty and a denied directory lists as empty (issue 10 §5: tree walkers go
		// through), and none of their content is there.
		{name: "deny/file", bundle: "ro", probe: "read", args: in(roWS, "secret.txt"), want: masked("read")},
		{name: "deny/dir-subtree", bundle: "ro", probe: "read", args: in(roWS, "private/key"), want: denied("open", "ENOENT")},
		{name: "deny/dir-listing", bundle: "ro", probe: "list", args: in(roWS, "private"), want: masked("readdir")},
		{name: "deny/glob-top", bundle: "ro", probe: "read", args: in(roWS, ".env"), want: masked("read")},
		{name: "deny/glob-nested", bundle: "ro", probe: "read", args: in(roWS, "sub/.env"), want: masked("read")},

		// Undeclared files: Landlock alone (world-readable, outside /tmp), Landlock and DAC, and
		// the host's /tmp, which the sandbox replaces with its own.
		{name: "undeclared/world-readable", bundle: "ro", probe: "read", args: out("secret"), want: denied("open", "EACCES")},
		{name: "undeclared/etc-file", bundle: "ro", probe: "read", args: lit(etcFile(t)), want: denied("open", "EACCES")},
		{name: "undeclared/etc-shadow", bundle: "ro", probe: "read", args: lit("/etc/shadow"), want: denied("open", "EACCES")},
		{name: "undeclared/root-home", bundle: "ro", probe: "list", args: lit("/root"), want: denied("readdir", "EACCES")},
		{name: "undeclared/host-tmp-hidden", bundle: "ro", probe: "read", args: func(s *suite) []string { return []string{filepath.Join(s.hostTmp, "undeclared.txt")} },
			want: denied("open", "ENOENT")},

		// §7.2: symbolic links planted before the call, and made by the probe in a writable
		// workspace, to denied and undeclared files: Landlock judges the file they lead to.
		{name: "symlink/planted-to-undeclared", bundle: "ro", probe: "read", args: in(roWS, "link-outside"), want: denied("open", "EACCES")},
		{name: "symlink/planted-to-shadow", bundle: "ro", probe: "read", args: in(roWS, "link-shadow"), want: denied("open", "EACCES")},
		{name: "symlink/planted-to-denied", bundle: "ro", probe: "read", args: in(roWS, "link-secret"), want: masked("read")},
		{name: "symlink/made-to-undeclared", bundle: "rw", ws: rwWS, probe: "symlink-read",
			args: func(s *suite) []string {
				return []string{filepath.Join(outside, "secret"), filepath.Join(s.rw, "l-outside")}
			}, want: denied("open", "EACCES")},
		{name: "symlink/made-to-denied", bundle: "rw", ws: rwWS, probe: "symlink-read", args: in(rwWS, "secret.txt", "l-secret"), want: masked("read")},
		{name: "symlink/made-to-shadow", bundle: "rw", ws: rwWS, probe: "symlink-read",
			args: func(s *suite) []string { return []string{"/etc/shadow", filepath.Join(s.rw, "l-shadow")} }, want: denied("open", "EACCES")},

		// §7.3: hard links to an undeclared or a denied file: the writable root is its own mount,
		// and a mask is one too, so link(2) cannot reach across (EXDEV).
		{name: "hardlink/to-undeclared", bundle: "rw", ws: rwWS, probe: "link",
			args: func(s *suite) []string {
				return []string{filepath.Join(outside, "secret"), filepath.Join(s.rw, "hl-outside")}
			}, want: denied("link", "EXDEV")},
		{name: "hardlink/to-denied", bundle: "rw", ws: rwWS, probe: "link", args: in(rwWS, "secret.txt", "hl-secret"), want: denied("link", "EXDEV")},
		{name: "hardlink/to-runtime-file", bundle: "rw", ws: rwWS, probe: "link",
			args: func(s *suite) []string { return []string{"/etc/passwd", filepath.Join(s.rw, "hl-passwd")} }, want: denied("link", "EXDEV")},

		// §7.4, §7.6: moving a masked path, or its parent, aside (to put one's own in its place):
		// both are mount points.
		{name: "rename/git-hooks-out-of-git", bundle: "rw", ws: rwWS, probe: "rename", args: in(rwWS, ".git/hooks", "hooks-moved"), want: denied("rename", "EXDEV")},
		{name: "rename/git-hooks-within-git", bundle: "rw", ws: rwWS, probe: "rename", args: in(rwWS, ".git/hooks", ".git/hooks-moved"), want: denied("rename", "EBUSY")},
		{name: "rename/git-dir", bundle: "rw", ws: rwWS, probe: "rename", args: in(rwWS, ".git", "git-moved"), want: denied("rename", "EBUSY")},
		{name: "rename/denied-file", bundle: "rw", ws: rwWS, probe: "rename", args: in(rwWS, "secret.txt", "moved.txt"), want: denied("rename", "EBUSY")},
		// §7.6: persistence through files the user's own tools run later.
		{name: "persist/git-hook-write", bundle: "rw", ws: rwWS, probe: "write", args: in(rwWS, ".git/hooks/pre-commit"), want: denied("open", "EROFS")},
		{name: "persist/git-config-write", bundle: "rw", ws: rwWS, probe: "write", args: in(rwWS, ".git/config"), want: denied("open", "EROFS")},
		// §7.7: .git/hooks as a symbolic link: its target is masked too (an empty read-only
		// directory), and the link itself (an empty read-only file).
		{name: "persist/git-hooks-symlink-target", bundle: "rw", ws: rwWS, probe: "write", args: in(rwWS, "linkedhooks/pre-commit"), want: denied("open", "EROFS")},
		{name: "persist/git-hooks-symlink", bundle: "rw", ws: rwWS, probe: "write", args: in(rwWS, "linked/.git/hooks/pre-commit"), want: denied("open", "ENOTDIR")},
		// Mandatory masks that do not exist when the call starts: a .vscode/tasks.json in the
		// workspace root, and the hooks of a repository whose .git/hooks is missing. The kernel
		// cannot mask a path that does not exist without a mount point on the host, so the
		// write succeeds inside; once the call's processes are gone the host removes what was
		// created there (sandbox.Sweep), so nothing reaches the user's own tools.
		{name: "persist/vscode-tasks-missing-dir", bundle: "rw", ws: rwWS, probe: "plant", args: in(rwWS, ".vscode/tasks.json"), want: want{result: "allowed"},
			after: hostHas("rw", ".vscode/tasks.json", false)},
		{name: "persist/git-hook-missing-hooks-dir", bundle: "rw", ws: rwWS, probe: "plant", args: in(rwWS, "bare/.git/hooks/pre-commit"), want: want{result: "allowed"},
			after: hostHas("rw", "bare/.git/hooks/pre-commit", false)},

		// §7.8: metadata of read-only files, including one the agent owns (DAC would allow it).
		{name: "metadata/chmod-ro-workspace-owned", bundle: "ro", probe: "chmod", args: in(roWS, "owned.txt"), want: denied("chmod", "EROFS")},
		{name: "metadata/utime-ro-workspace-owned", bundle: "ro", probe: "utime", args: in(roWS, "owned.txt"), want: denied("utimensat", "EROFS")},
		{name: "metadata/xattr-ro-workspace-owned", bundle: "ro", probe: "setxattr", args: in(roWS, "owned.txt"), want: denied("setxattr", "EROFS")},
		{name: "metadata/chmod-undeclared-owned", bundle: "ro", probe: "chmod", args: out("owned"), want: denied("chmod", "EROFS")},
		{name: "metadata/utime-undeclared-owned", bundle: "ro", probe: "utime", args: out("owned"), want: denied("utimensat", "EROFS")},
		{name: "metadata/xattr-undeclared-owned", bundle: "ro", probe: "setxattr", args: out("owned"), want: denied("setxattr", "EROFS")},
		{name: "metadata/chmod-etc-passwd", bundle: "ro", probe: "chmod", args: lit("/etc/passwd"), want: denied("chmod", "EROFS")},

		// §7.9: mounts: unmount a mask, mount over a denied directory, clone a mount.
		{name: "mount/umount-mask-file", bundle: "ro", probe: "umount", args: in(roWS, "secret.txt"), want: denied("umount2", "EPERM")},
		{name: "mount/umount-mask-git-hooks", bundle: "rw", ws: rwWS, probe: "umount", args: in(rwWS, ".git/hooks"), want: denied("umount2", "EPERM")},
		{name: "mount/tmpfs-over-denied", bundle: "ro", probe: "mount", args: in(roWS, "private"), want: denied("mount", "EPERM")},
		{name: "mount/tmpfs-over-workspace", bundle: "ro", probe: "mount", args: func(s *suite) []string { return []string{s.ro} }, want: denied("mount", "EPERM")},
		{name: "mount/open-tree-mask", bundle: "ro", probe: "open-tree", args: in(roWS, "private"), want: denied("open_tree", "EPERM")},

		// §7.10: /proc: the init's root, cwd, fds, memory and environment, and the probe's own
		// root as a way around the mount view. The PID namespace shows no host process.
		{name: "proc/pid1-is-sandbox-init", bundle: "ro", probe: "read", args: lit("/proc/1/cmdline"), want: allowed("clihost-sandbox")},
		{name: "proc/pid1-root", bundle: "ro", probe: "read", args: lit("/proc/1/root/etc/passwd"), want: denied("open", "EACCES")},
		{name: "proc/pid1-cwd", bundle: "ro", probe: "list", args: lit("/proc/1/cwd"), want: denied("readdir", "EACCES")},
		{name: "proc/pid1-fds", bundle: "ro", probe: "list", args: lit("/proc/1/fd"), want: denied("readdir", "EACCES")},
		{name: "proc/pid1-mem", bundle: "ro", probe: "read", args: lit("/proc/1/mem"), want: denied("open", "EACCES")},
		{name: "proc/pid1-environ", bundle: "ro", probe: "read", args: lit("/proc/1/environ"), want: denied("open", "EACCES")},
		{name: "proc/self-root-undeclared", bundle: "ro", probe: "read", args: func(*suite) []string { return []string{"/proc/self/root" + filepath.Join(outside, "secret")} },
			want: denied("open", "EACCES")},
		{name: "proc/self-root-denied", bundle: "ro", probe: "read", args: func(s *suite) []string { return []string{"/proc/self/root" + filepath.Join(s.ro, "secret.txt")} },
			want: masked("read")},
		{name: "proc/sysctl-memfd-noexec", bundle: "ro", probe: "write", args: lit("/proc/sys/vm/memfd_noexec"), want: denied("open", "EROFS")},
		{name: "proc/host-pid-absent", bundle: "ro", probe: "read", args: func(*suite) []string { return []string{"/proc/" + itoa(os.Getpid()) + "/cmdline"} },
			want: denied("open", "ENOENT")},

		// Writes outside the writable roots.
		{name: "write/etc", bundle: "ro", probe: "write", args: lit("/etc/clihost-escape"), want: denied("open", "EROFS")},
		{name: "write/home", bundle: "ro", probe: "mkdir", args: lit("$HOME"), want: denied("mkdir", "EROFS")},
		{name: "write/ro-workspace", bundle: "ro", probe: "write", args: in(roWS, "new.txt"), want: denied("open", "EROFS"),
			after: hostHas("ro", "new.txt", false)},
		{name: "write/ro-workspace-overwrite", bundle: "ro", probe: "write", args: in(roWS, "owned.txt"), want: denied("open", "EROFS")},
		{name: "write/ro-workspace-mkdir", bundle: "ro", probe: "mkdir", args: in(roWS, "newdir"), want: denied("mkdir", "EROFS")},
		{name: "write/above-workspace-outside-tmp", bundle: "rw", ws: outWS, probe: "write", args: out("escape.txt"), want: denied("open", "EROFS"),
			after: func(t *testing.T, _ *suite) { absent(t, filepath.Join(outside, "escape.txt")) }},
		// The folders above a workspace under /tmp are made in the private /tmp, read-only (not
		// scratch the host never sees): EROFS, as outside /tmp.
		{name: "write/above-workspace-in-tmp", bundle: "rw", ws: rwWS, probe: "write", args: func(s *suite) []string { return []string{filepath.Join(filepath.Dir(s.rw), "escape.txt")} },
			want: denied("open", "EROFS"), after: func(t *testing.T, s *suite) { absent(t, filepath.Join(filepath.Dir(s.rw), "escape.txt")) }},
	})
}

// etcFile returns a world-readable file under /etc that the runtime read set does not include.
func etcFile(t *testing.T) string {
	for _, p := range []string{"/etc/hostname", "/etc/debian_version", "/etc/issue", "/etc/shells"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o004 != 0 {
			return p
		}
	}
	t.Fatal("no world-readable file under /etc to try")
	return ""
}

// hostHas returns an after-check that the host's copy of workspace ws ("ro" or "rw") holds (or
// does not hold) rel.
func hostHas(ws, rel string, want bool) func(*testing.T, *suite) {
	return func(t *testing.T, s *suite) {
		t.Helper()
		dir := s.ro
		if ws == "rw" {
			dir = s.rw
		}
		p := filepath.Join(dir, rel)
		_, err := os.Lstat(p)
		if got := err == nil; got != want {
			t.Errorf("host side: %s exists = %v, want %v", p, got, want)
		}
	}
}

// absent fails when p exists on the host.
func absent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); err == nil {
		t.Errorf("host side: %s was written from inside the sandbox", p)
		os.Remove(p)
	}
}
