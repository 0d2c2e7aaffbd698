// Package isolation is the data of one sandboxed program's plan: what it runs, what it may read,
// write and execute, its network and its resource limits. It is a leaf: package sandbox compiles a
// bundle's policy into a Plan, package sandbox/nsinit (the init) enforces one, package runner
// starts one, and the control API carries one to clihostctl (a login command) without importing
// any of them.
package isolation

import "time"

// Plan is everything the init needs to run one program. It travels to the init over a pipe passed
// as ExtraFiles[0] (package sandbox/nsinit), never through argv or the environment.
//
// Every path must be absolute, clean and real: the path lists (ReadOnly, ReadWrite, Exec, Deny) hold
// no symbolic link (only a Deny path may itself be one; its link is masked), as the policy check
// (sandbox.Compile) resolved them. Nothing resolves them again: the init opens each path once,
// refusing symbolic links (nsinit's openPlan), and builds the mounts and the Landlock rules from those
// descriptors, so a path swapped for a symbolic link after the check makes the sandbox fail
// (sandbox unavailable) instead of granting the link's target. Path is exec'd as given; it, or
// what it resolves to, must be listed in Exec.
type Plan struct {
	Path string   // the resolved program (absolute); must also be listed in Exec
	Args []string // argv, argv[0] included (conventionally the base name of Path)
	Dir  string   // working directory (absolute)
	Env  []string // the complete environment, KEY=VALUE; nil means empty
	// UID and GID are the unprivileged identity the program runs as when the host process is root
	// (e.g. 65534); neither may be 0 then. They are ignored when the host is not root: the program
	// then runs as the host user, mapped to uid 0 of a new user namespace, without capabilities.
	UID, GID int
	// Groups are the program's supplementary groups when the host process is root (none when
	// empty); 0 is refused. Ignored when the host is not root.
	Groups []int
	// Umask, when not 0, is the program's file mode creation mask (e.g. 0o007 in a workspace its
	// group shares); 0 keeps the host's.
	Umask int
	// ReadOnly are files or directories (directories: the whole subtree) the program may read.
	ReadOnly []string
	// ReadWrite are files or directories the program may read and write. They are bind-mounted
	// read-write with nosuid and nodev, and noexec unless an Exec file lies inside them.
	ReadWrite []string
	// Exec are the files the program may execute: the binary, its ELF interpreter and every
	// program it may spawn (with their interpreters). They are also readable.
	Exec []string
	// Protect are files or directories inside a ReadWrite root that stay read-only (a bundle's
	// folder in the workspace: its manifests and vendored binaries, which the host reads back for
	// later calls). Each is bound read-only over itself (nosuid, nodev, and noexec unless an Exec
	// file lies inside), after the ReadWrite roots, and the directories between it and its root are
	// pinned (nsinit's pinAncestors): nothing in it can be written, and it cannot be renamed or removed
	// (EROFS, EBUSY). Landlock grants on it are unchanged (readable where granted, executable where
	// Exec lists it). Paths outside every ReadWrite root are dropped (they are read-only anyway),
	// and so are those inside a Deny path or another Protect path.
	Protect []string
	// Absent are the Deny paths inside a ReadWrite root that did not exist when the policy was
	// checked (the host removes what the program creates there after it exits). Any other Deny
	// path inside a ReadWrite root that the init cannot find was removed after the check, and
	// could be created unmasked and unswept: the init refuses the sandbox then.
	Absent []string
	// Deny are paths masked in the sandbox (an empty, read-only directory, mode 0555, over
	// directories, an empty, read-only file, mode 0444, over anything else: walkers go through, and
	// nothing denied can be read) and never granted, even inside an allowed tree: ReadOnly and
	// ReadWrite entries at or beneath a Deny path are dropped.
	Deny []string
	// NoNetwork additionally denies every TCP bind and connect with Landlock (ABI v4+). The program
	// always runs in a new network namespace that has only the loopback interface, up.
	NoNetwork bool
	// Egress gives the program the host's egress servers (package sandbox/egress): before it
	// confines itself, the init creates their listening sockets inside the sandbox's network namespace
	// (package sandbox/egress/addr: HTTPProxyPort and SOCKSPort on 127.0.0.1, UDP DNSPort on 127.0.0.1,
	// CapturePorts on 0.0.0.0) and sends them to the host (nsinit.Cmd.Listeners), and mounts a
	// generated, read-only /etc/resolv.conf ("nameserver 127.0.0.1") and /etc/hosts (localhost
	// and the sandbox's hostname). Landlock (ABI v4 or later, else the sandbox is refused) then lets the program
	// connect to those TCP ports only, and bind no TCP port. Incompatible with NoNetwork.
	Egress bool
	// Ingress are TCP ports the program listens on, on its own loopback, that must be reachable
	// from the host's loopback (an OAuth login's callback server): Landlock lets the program bind
	// them (every other bind stays refused) and the host forwards them (nsinit.Cmd.ServeIngress).
	Ingress []int
	// NetworkKey, when not empty, lets the program run in a network namespace that an earlier call
	// with the same key and the same UID, GID and Groups left without any socket, instead of a new
	// one (the zygote's, nsinit's zygote_net.go; an init always makes a new one). The host sets it to
	// who asked for the call (a control socket's user, an MCP agent's token). Ignored with Egress.
	NetworkKey string
	// Seccomp installs the seccomp filter of package sandbox/seccomp as the init's last confinement
	// step, before it forks the program.
	Seccomp bool
	// Timeout, when positive, bounds the sandbox's life on its own, whatever the host does: once
	// Timeout has passed since nsinit.Command, the init exits with status 128+SIGKILL, and the kernel kills
	// everything left in the sandbox. A host that stops the program itself at its own timeout sets
	// this a little later (package runner: its timeout, plus the grace between SIGTERM and SIGKILL,
	// plus a margin), so that this guard acts only when the host could not.
	Timeout time.Duration
	// NoExecMemfd makes anonymous in-memory files unexecutable: vm.memfd_noexec=2 in the sandbox's
	// PID namespace, and the seccomp filter refusing MFD_EXEC and execveat(AT_EMPTY_PATH). In a user
	// namespace (a host that is not root) that sysctl is the host's and cannot be written: unless
	// the host has set it to 2 already, the filter then also refuses memfd_create without
	// MFD_NOEXEC_SEAL (seccomp.Options.SealMemfds).
	NoExecMemfd bool
	// Limits are the program's resource limits (see Limits).
	Limits Limits
}

// Limits bound what one sandboxed program and everything it starts may use; zero means no limit
// of that kind. nsinit.Command puts the init into a new control group for the call (package
// sandbox/cgroup) when MemoryBytes, Pids or CPU is set and the host offers cgroups; the init sets
// the rlimits on itself before it forks the program (they are inherited and cannot be raised)
// and mounts /tmp and /dev/shm with TmpfsBytes as their size.
type Limits struct {
	MemoryBytes int64         // memory of the whole call, swap included (cgroup memory controller)
	Pids        int64         // processes and threads of the whole call (cgroup pids controller)
	CPU         time.Duration // CPU time: of the whole call (cgroup accounting, see cgroup.Group.WatchCPU) and of each process (RLIMIT_CPU)
	NoFile      int64         // open files per process (RLIMIT_NOFILE)
	FileSize    int64         // the largest file a process may write (RLIMIT_FSIZE)
	TmpfsBytes  int64         // the size of the sandbox's private /tmp and of /dev/shm, each
}
