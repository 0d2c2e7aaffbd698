package nsinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/clihost/clihost/sandbox/egress/addr"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Plan is everything the init needs to run one program. It travels to the init over a pipe passed
// as ExtraFiles[0], never through argv or the environment.
//
// Every path must be absolute, clean and real: the path lists (ReadOnly, ReadWrite, Exec, Deny) hold
// no symbolic link (only a Deny path may itself be one; its link is masked), as the policy check
// (sandbox.Compile) resolved them. Nothing resolves them again: the init opens each path once,
// refusing symbolic links (see openPlan), and builds the mounts and the Landlock rules from those
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
	// pinned (see pinAncestors): nothing in it can be written, and it cannot be renamed or removed
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
	// (addr.HTTPProxyPort and addr.SOCKSPort on 127.0.0.1, UDP addr.DNSPort on 127.0.0.1,
	// addr.CapturePorts on 0.0.0.0) and sends them to the host (Cmd.Listeners), and mounts a
	// generated, read-only /etc/resolv.conf ("nameserver 127.0.0.1") and /etc/hosts (localhost
	// and the sandbox's hostname). Landlock (ABI v4 or later, else the sandbox is refused) then lets the program
	// connect to those TCP ports only, and bind no TCP port. Incompatible with NoNetwork.
	Egress bool
	// Ingress are TCP ports the program listens on, on its own loopback, that must be reachable
	// from the host's loopback (an OAuth login's callback server): Landlock lets the program bind
	// them (every other bind stays refused) and the host forwards them (Cmd.ServeIngress).
	Ingress []int
	// Seccomp installs the seccomp filter of package sandbox/seccomp as the init's last confinement
	// step, before it forks the program.
	Seccomp bool
	// Timeout, when positive, bounds the sandbox's life on its own, whatever the host does: once
	// Timeout has passed since Command, the init exits with status 128+SIGKILL, and the kernel kills
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
// of that kind. Command puts the init into a new control group for the call (package
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

// cgroupLimits reports whether l has a limit a control group enforces.
func (l Limits) cgroupLimits() bool { return l.MemoryBytes > 0 || l.Pids > 0 || l.CPU > 0 }

// UseEgress gives the plan the host's egress (Egress set, NoNetwork cleared) and adds the proxy
// variables (addr.ProxyEnv) to a copy of Env, after the others, so that they win.
func (p *Plan) UseEgress() {
	p.Egress, p.NoNetwork = true, false
	p.Env = append(slices.Clone(p.Env), addr.ProxyEnv()...)
}

// envelope is what is written to the plan pipe: the plan plus what the host decided about it.
type envelope struct {
	// Protocol is planProtocol of the host that wrote it: a helper executable from another build
	// refuses a plan it may not understand rather than enforce it partly.
	Protocol int
	Plan     Plan
	// UserNS is set when the host is not root: the sandbox then has its own user namespace, in
	// which the program keeps uid 0 (mapped to the host user) and only loses its capabilities.
	UserNS bool
	// Deadline is the CLOCK_BOOTTIME instant (nanoseconds) Plan.Timeout after Command, at which the
	// init ends the sandbox; 0 for none.
	Deadline int64
	// CgroupFDs are the init's descriptors of the tasks files of its call's cgroup v1 groups,
	// opened by the host: the thread that forks the program joins them, by writing "0" to each.
	CgroupFDs []int
}

// planProtocol changes whenever the plan's meaning changes.
const planProtocol = 5

// maxPlanSize bounds the encoded plan (it must fit into one pipe buffer, see writePlan).
const maxPlanSize = 1 << 20

// pathListNames names the path lists of a Plan, in error messages.
var pathListNames = [...]string{"ReadOnly", "ReadWrite", "Exec", "Deny", "Protect"}

// lists returns pointers to the path lists of p that the init resolves, in the order of
// pathListNames.
func (p *Plan) lists() [5]*[]string {
	return [5]*[]string{&p.ReadOnly, &p.ReadWrite, &p.Exec, &p.Deny, &p.Protect}
}

// prepare checks p and returns a copy with its path lists de-duplicated, and with ReadOnly and
// ReadWrite entries covered by a Deny path dropped. It resolves nothing: see Plan. root reports
// whether the host process is root.
func prepare(p Plan, root bool) (Plan, error) {
	if !isAbsClean(p.Path) {
		return Plan{}, fmt.Errorf("nsinit: Path %q is not an absolute clean path", p.Path)
	}
	if len(p.Args) == 0 {
		return Plan{}, errors.New("nsinit: Args is empty (argv[0] is required)")
	}
	if !isAbsClean(p.Dir) {
		return Plan{}, fmt.Errorf("nsinit: Dir %q is not an absolute clean path", p.Dir)
	}
	if p.Egress && p.NoNetwork {
		return Plan{}, errors.New("nsinit: Egress and NoNetwork exclude each other")
	}
	if root && (p.UID <= 0 || p.GID <= 0) {
		return Plan{}, fmt.Errorf("nsinit: UID %d / GID %d: the program must not run as root", p.UID, p.GID)
	}
	for _, g := range p.Groups {
		if g <= 0 {
			return Plan{}, fmt.Errorf("nsinit: supplementary group %d: the program must not run with root's group", g)
		}
	}
	out := p
	out.Groups = slices.Compact(slices.Sorted(slices.Values(p.Groups)))
	for i, list := range out.lists() {
		checked := make([]string, 0, len(*list))
		for _, path := range *list {
			if err := checkPath(path); err != nil {
				return Plan{}, fmt.Errorf("nsinit: %s: %w", pathListNames[i], err)
			}
			if !slices.Contains(checked, path) {
				checked = append(checked, path)
			}
		}
		*list = checked
	}
	for _, a := range out.Absent {
		if err := checkPath(a); err != nil {
			return Plan{}, fmt.Errorf("nsinit: Absent: %w", err)
		}
	}
	for _, port := range out.Ingress {
		if port < 1 || port > 65535 {
			return Plan{}, fmt.Errorf("nsinit: Ingress port %d is not a TCP port", port)
		}
	}
	out.Ingress = slices.Compact(slices.Sorted(slices.Values(out.Ingress)))
	for _, d := range out.Deny {
		if d == "/" {
			return Plan{}, errors.New("nsinit: Deny: cannot mask /")
		}
	}
	for _, rw := range out.ReadWrite {
		if rw == "/" {
			return Plan{}, errors.New("nsinit: ReadWrite: / cannot be writable")
		}
	}
	for _, e := range out.Exec {
		if d, ok := coveringPath(e, out.Deny); ok {
			return Plan{}, fmt.Errorf("nsinit: Exec %s lies under Deny %s", e, d)
		}
	}
	// Path is exec'd by name inside the sandbox, where only the Exec files are executable whatever
	// a link leads to; resolving it here only finds it in Exec, it grants nothing.
	path, err := filepath.EvalSymlinks(p.Path)
	if err != nil {
		return Plan{}, fmt.Errorf("nsinit: Path: %w", err)
	}
	if !slices.Contains(out.Exec, p.Path) && !slices.Contains(out.Exec, path) {
		return Plan{}, fmt.Errorf("nsinit: Path %s is not listed in Exec", p.Path)
	}
	out.ReadOnly = withoutDenied(out.ReadOnly, out.Deny)
	out.ReadWrite = withoutDenied(out.ReadWrite, out.Deny)
	out.Protect = protectedIn(withoutDenied(out.Protect, out.Deny), out.ReadWrite)
	return out, nil
}

// checkPath checks that path is absolute, clean and outside the sandbox's own /proc and /dev.
func checkPath(path string) error {
	if !isAbsClean(path) {
		return fmt.Errorf("%q is not an absolute clean path", path)
	}
	for _, own := range []string{"/proc", "/dev"} {
		if within(path, own) {
			return fmt.Errorf("%s: paths under %s are provided by the sandbox itself", path, own)
		}
	}
	return nil
}

// isAbsClean reports whether p is an absolute path in canonical form.
func isAbsClean(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p
}

// within reports whether path is dir or lies beneath it. Both must be clean and absolute.
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// coveringPath returns the first of dirs that path lies within.
func coveringPath(path string, dirs []string) (string, bool) {
	for _, d := range dirs {
		if within(path, d) {
			return d, true
		}
	}
	return "", false
}

// withoutDenied returns the paths of list that lie within none of deny.
func withoutDenied(list, deny []string) []string {
	var out []string
	for _, p := range list {
		if _, denied := coveringPath(p, deny); !denied {
			out = append(out, p)
		}
	}
	return out
}

// protectedIn returns the paths of protect that lie within a writable root and within no other
// path of protect.
func protectedIn(protect, writable []string) []string {
	var out []string
	for _, p := range protect {
		if _, ok := coveringPath(p, writable); !ok {
			continue
		}
		if slices.ContainsFunc(protect, func(q string) bool { return q != p && within(p, q) }) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// writePlan encodes e into a new pipe and returns its read end; the write end is closed. The whole
// plan sits in the pipe buffer, so nothing has to wait for the child to start reading.
func writePlan(e envelope) (*os.File, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	if len(data) > maxPlanSize {
		return nil, fmt.Errorf("plan is %d bytes, more than %d", len(data), maxPlanSize)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("plan pipe: %w", err)
	}
	defer w.Close()
	if len(data) > os.Getpagesize() { // a pipe may hold as little as one page (pipe-user-pages-soft)
		if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, len(data)); err != nil {
			r.Close()
			return nil, fmt.Errorf("plan pipe size %d: %w", len(data), err)
		}
	}
	if _, err := w.Write(data); err != nil {
		r.Close()
		return nil, fmt.Errorf("write plan: %w", err)
	}
	return r, nil
}

// readPlan reads and decodes the envelope from the inherited pipe at fd 3, and closes it.
func readPlan() (envelope, error) {
	f := os.NewFile(3, "plan")
	if f == nil {
		return envelope{}, errors.New("no plan pipe on fd 3")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPlanSize+1))
	if err != nil {
		return envelope{}, fmt.Errorf("read: %w", err)
	}
	var e envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return envelope{}, fmt.Errorf("decode: %w", err)
	}
	if e.Protocol != planProtocol {
		return envelope{}, fmt.Errorf("the plan is protocol %d, this sandbox executable speaks %d: install clihost-sandbox from the same build as clihostd", e.Protocol, planProtocol)
	}
	return e, nil
}
