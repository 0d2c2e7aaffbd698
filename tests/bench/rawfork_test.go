package bench

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox/nsinit"
	"github.com/clihost/clihost/sandbox/seccomp"
)

// BenchmarkFloorRawFork measures the start issue 14's remaining targets need: a sandbox that is
// not a new Go process per call. This process forks itself with one raw clone(2) into new mount,
// PID, network, IPC, UTS and cgroup namespaces, and the child, which runs no Go runtime (no
// allocation, no stack growth: a list of system calls prepared before the fork, run by a nosplit
// loop), builds what the sandbox's init builds for /bin/true — a private /, /proc, a minimal /dev,
// /tmp, the workspace writable and the rest read-only, nosuid and nodev, a mask, loopback up, the
// bounding set dropped, uid and gid 65534, no_new_privs, a Landlock ruleset (files, TCP, scopes),
// rlimits, every descriptor close-on-exec, clihost's seccomp filter, default signal handlers — and
// execs /bin/true as the namespace's PID 1. It is a floor, not clihost: no plan, no cgroup, no
// checks of what it mounts, and the forking process is this test binary. Its CPU per call
// (cpu-ms/op) against PeerClihostTrue's and PeerBwrapTrue's in the same run says what replacing
// the Go init by such a start would buy (docs/BENCHMARKS.md, "Round 4").
func BenchmarkFloorRawFork(b *testing.B) {
	benchmarkFloor(b, false)
}

// BenchmarkFloorRawForkNetPool is BenchmarkFloorRawFork with the network namespace made ahead of
// the call (a goroutine keeps four fresh ones ready, each used once) and entered with setns(2):
// creating a network namespace is most of what clone(2) costs here.
func BenchmarkFloorRawForkNetPool(b *testing.B) {
	benchmarkFloor(b, true)
}

func benchmarkFloor(b *testing.B, netPool bool) {
	fixture.NeedRoot(b)
	fixture.NeedSandbox(b, nsinit.Check())
	ws := floorWorkspace(b)
	p, err := floorProgram(ws, []string{trueBin}, -1, netPool)
	if err != nil {
		b.Fatal(err)
	}
	nets := make(chan int, 4)
	done := make(chan struct{})
	if netPool {
		go func() {
			defer close(nets)
			for {
				fd, err := newNetns()
				if err != nil {
					b.Error(err)
					return
				}
				select {
				case nets <- fd:
				case <-done:
					unix.Close(fd)
					return
				}
			}
		}()
		defer func() {
			close(done)
			for fd := range nets {
				unix.Close(fd)
			}
		}()
	}
	call := func() error {
		if netPool {
			fd, ok := <-nets
			if !ok {
				return fmt.Errorf("no network namespace")
			}
			defer unix.Close(fd)
			p.ops[0].args[0] = uintptr(fd)
		}
		return p.run()
	}
	if err := call(); err != nil { // once, to fail with the step's name rather than a count
		b.Fatal(err)
	}
	defer reportCPU(b)()
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorClone is the raw fork alone (the child exits at once), without new namespaces and
// with each kind, to say what creating and tearing down each costs here.
func BenchmarkFloorClone(b *testing.B) {
	fixture.NeedRoot(b)
	sig := uintptr(unix.SIGCHLD)
	for _, c := range []struct {
		name  string
		flags uintptr
	}{
		{"none", sig},
		{"net", unix.CLONE_NEWNET | sig},
		{"mount", unix.CLONE_NEWNS | sig},
		{"pid", unix.CLONE_NEWPID | sig},
		{"ipc-uts-cgroup", unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | sig},
		{"all-six", unix.CLONE_NEWNET | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | sig},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := &rawProgram{flags: c.flags}
			p.call("exit", unix.SYS_EXIT_GROUP, 0)
			defer reportCPU(b)()
			for b.Loop() {
				if err := p.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// newNetns returns a descriptor of a new network namespace, made on a locked thread that then
// returns to this process's.
func newNetns() (int, error) {
	runtime.LockOSThread()
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return -1, err
	}
	defer unix.Close(self)
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return -1, err
	}
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
		return -1, err // the thread stays locked: it ends with this goroutine's
	}
	runtime.UnlockOSThread()
	return fd, err
}

// TestFloorRawForkConfines checks that BenchmarkFloorRawFork measures a sandbox: its program
// runs as PID 1 of its own namespaces as uid 65534 with no capability, no_new_privs and seccomp,
// may write only its workspace, /tmp and /dev, may read only what its Landlock rules name, and
// sees none of the host's processes.
func TestFloorRawForkConfines(t *testing.T) {
	fixture.NeedRoot(t)
	ws := floorWorkspace(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	script := `grep -E '^(Uid|Gid|CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
echo pid $$
test -e /proc/` + strconv.Itoa(os.Getpid()) + ` && echo sees the host || echo sees none of the host
echo hostname $(cat /proc/sys/kernel/hostname)
for f in "$WS/w" /tmp/w /dev/shm/w /usr/w /etc/w; do (echo x > "$f") 2>/dev/null && echo wrote "$f" || echo refused "$f"; done
cat /etc/passwd >/dev/null 2>&1 && echo read /etc
ls /root >/dev/null 2>&1 && echo read /root || echo refused /root
ls /var >/dev/null 2>&1 && echo read /var || echo refused /var`
	p, err := floorProgram(ws, []string{"/bin/sh", "-c", "WS=" + ws + "\n" + script}, int(w.Fd()), false)
	if err != nil {
		t.Fatal(err)
	}
	runErr := p.run()
	w.Close()
	out, _ := io.ReadAll(r)
	if runErr != nil {
		t.Fatalf("%v\n%s", runErr, out)
	}
	got := strings.Fields(string(out))
	for _, want := range [][]string{
		{"pid", "1"}, {"sees", "none", "of", "the", "host"}, {"Uid:", "65534", "65534", "65534", "65534"}, {"Gid:", "65534", "65534", "65534", "65534"},
		{"CapEff:", "0000000000000000"}, {"CapPrm:", "0000000000000000"}, {"CapBnd:", "0000000000000000"},
		{"NoNewPrivs:", "1"}, {"Seccomp:", "2"}, {"hostname", "sandbox"},
		{"wrote", ws + "/w"}, {"wrote", "/tmp/w"}, {"wrote", "/dev/shm/w"}, {"refused", "/usr/w"}, {"refused", "/etc/w"},
		{"read", "/etc"}, {"refused", "/root"}, {"refused", "/var"}, // /var: Landlock alone refuses it
	} {
		if !containsRun(got, want) {
			t.Errorf("the sandboxed program's report lacks %q:\n%s", strings.Join(want, " "), out)
		}
	}
}

// floorWorkspace is a folder anyone may write (the floor's program runs as uid 65534), reachable.
func floorWorkspace(tb testing.TB) string {
	tb.Helper()
	ws := filepath.Join(tb.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o777); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(ws, 0o777); err != nil { // past the umask
		tb.Fatal(err)
	}
	fixture.Reachable(tb, ws)
	return ws
}

// containsRun reports whether want occurs in fields as consecutive fields.
func containsRun(fields, want []string) bool {
	for i := range fields {
		if i+len(want) <= len(fields) && slices.Equal(fields[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// rawOp is one system call of a rawProgram.
type rawOp struct {
	nr    uintptr
	args  [6]uintptr
	ref   [6]int8 // ≥ 0: the argument is the result saved in that register, not args[i]
	save  int8    // ≥ 0: the register the result is saved in
	allow uintptr // an errno that is not a failure (0: none)
	what  string  // for the error; never read by the child
}

// rawProgram is the list of system calls a raw-forked child runs, and the memory their pointer
// arguments point to (kept reachable, and never moved: Go's heap does not move objects).
type rawProgram struct {
	ops   []rawOp
	regs  [16]uintptr
	msg   [2]uintptr // the failed op's index and errno, as the child reports it
	mask  [2]uint64  // all signals blocked; the thread's mask before the fork
	keep  []any
	flags uintptr
}

// ptr returns the address of a copy of v that p keeps.
func (p *rawProgram) ptr(v []byte) uintptr {
	c := append([]byte(nil), v...)
	p.keep = append(p.keep, c)
	return uintptr(unsafe.Pointer(&c[0]))
}

// str returns the address of s as a NUL-terminated string p keeps.
func (p *rawProgram) str(s string) uintptr { return p.ptr(append([]byte(s), 0)) }

// call appends a system call with literal arguments.
func (p *rawProgram) call(what string, nr uintptr, args ...uintptr) *rawOp {
	op := rawOp{nr: nr, save: -1, what: what, ref: [6]int8{-1, -1, -1, -1, -1, -1}}
	copy(op.args[:], args)
	p.ops = append(p.ops, op)
	return &p.ops[len(p.ops)-1]
}

// floorProgram is the child's program for running argv with workspace ws; with out ≥ 0, the
// program's standard output and error are that descriptor.
// With netPool, the first system call enters the network namespace whose descriptor the caller
// writes in ops[0].args[0] (clone makes none).
func floorProgram(ws string, argv []string, out int, netPool bool) (*rawProgram, error) {
	p := &rawProgram{flags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | uintptr(unix.SIGCHLD)}
	if netPool {
		p.call("setns", unix.SYS_SETNS, 0, unix.CLONE_NEWNET)
	} else {
		p.flags |= unix.CLONE_NEWNET
	}
	at := uintptr(0xffffff9c) // AT_FDCWD as the kernel reads an int
	mount := func(src, dst, fstype string, flags uintptr, data string) {
		var s, t, d uintptr
		if src != "" {
			s = p.str(src)
		}
		if fstype != "" {
			t = p.str(fstype)
		}
		if data != "" {
			d = p.str(data)
		}
		p.call("mount "+dst, unix.SYS_MOUNT, s, p.str(dst), t, flags, d)
	}
	setattr := func(path string, recursive bool, set, clr uint64) {
		attr := make([]byte, 32)
		binary.NativeEndian.PutUint64(attr[0:], set)
		binary.NativeEndian.PutUint64(attr[8:], clr)
		flags := uintptr(0)
		if recursive {
			flags = unix.AT_RECURSIVE
		}
		p.call("mount_setattr "+path, unix.SYS_MOUNT_SETATTR, at, p.str(path), flags, p.ptr(attr), 32)
	}

	mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
	p.call("sethostname", unix.SYS_SETHOSTNAME, p.str("sandbox"), 7)
	// The workspace, taken before /tmp is covered (it may lie in /tmp): writable, nosuid, nodev.
	const wsTree = 12
	p.call("open_tree "+ws, unix.SYS_OPEN_TREE, at, p.str(ws), unix.OPEN_TREE_CLONE|unix.AT_RECURSIVE|unix.O_CLOEXEC).save = wsTree
	wsAttr := make([]byte, 32)
	binary.NativeEndian.PutUint64(wsAttr, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	p.call("mount_setattr "+ws, unix.SYS_MOUNT_SETATTR, 0, p.str(""), unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, p.ptr(wsAttr), 32).ref[0] = wsTree
	// The host's devices, taken before /dev is covered.
	devs := []string{"null", "zero", "full", "random", "urandom", "tty"}
	for i, d := range devs {
		p.call("open_tree /dev/"+d, unix.SYS_OPEN_TREE, at, p.str("/dev/"+d), unix.OPEN_TREE_CLONE|unix.O_CLOEXEC).save = int8(i)
	}
	// Everything read-only, nosuid and nodev; then the workspace writable again.
	setattr("/", true, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, 0)
	mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
	if rel, err := filepath.Rel("/tmp", ws); err == nil && filepath.IsLocal(rel) {
		dir := "/tmp"
		for _, c := range strings.Split(rel, "/") {
			dir += "/" + c
			p.call("mkdir "+dir, unix.SYS_MKDIRAT, at, p.str(dir), 0o755)
		}
	}
	p.call("move_mount "+ws, unix.SYS_MOVE_MOUNT, 0, p.str(""), at, p.str(ws), unix.MOVE_MOUNT_F_EMPTY_PATH).ref[0] = wsTree
	mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755")
	for i, d := range devs {
		p.call("create /dev/"+d, unix.SYS_OPENAT, at, p.str("/dev/"+d), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o666).save = int8(len(devs) + i)
		p.call("close", unix.SYS_CLOSE).ref[0] = int8(len(devs) + i)
		mv := p.call("move_mount /dev/"+d, unix.SYS_MOVE_MOUNT, 0, p.str(""), at, p.str("/dev/"+d), unix.MOVE_MOUNT_F_EMPTY_PATH)
		mv.ref[0] = int8(i)
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		p.call("mkdir "+d, unix.SYS_MKDIRAT, at, p.str(d), 0o755)
	}
	mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
	mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
	for _, l := range [][2]string{{"pts/ptmx", "/dev/ptmx"}, {"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"},
		{"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"}} {
		p.call("symlink "+l[1], unix.SYS_SYMLINKAT, p.str(l[0]), at, p.str(l[1]))
	}
	if fi, err := os.Stat("/etc/ssh/ssh_config.d"); err == nil && fi.IsDir() { // a mask, as bwrap's
		mount("tmpfs", "/etc/ssh/ssh_config.d", "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0")
	}

	// Loopback up.
	const sock = 15
	p.call("socket", unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0).save = sock
	ifr := make([]byte, 40)
	copy(ifr, "lo")
	binary.NativeEndian.PutUint16(ifr[16:], unix.IFF_UP|unix.IFF_RUNNING)
	p.call("lo up", unix.SYS_IOCTL, 0, unix.SIOCSIFFLAGS, p.ptr(ifr)).ref[0] = sock

	// Privileges: the bounding set, then uid and gid 65534 (which clears the capabilities).
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		p.call("drop capability", unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c).allow = uintptr(unix.EINVAL)
	}
	p.call("setgroups", unix.SYS_SETGROUPS, 0, 0)
	p.call("setresgid", unix.SYS_SETRESGID, 65534, 65534, 65534)
	p.call("setresuid", unix.SYS_SETRESUID, 65534, 65534, 65534)
	p.call("no_new_privs", unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)

	// Landlock: read and execute /usr, /etc and /proc, everything in the workspace, /tmp and /dev.
	// The strictest ruleset this kernel has: file rights by ABI (v2 refer, v3 truncate, v5
	// ioctl_dev), TCP from v4, the scopes from v6.
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return nil, fmt.Errorf("Landlock ABI %d: %v", abi, err)
	}
	all := uint64(1<<13 - 1)
	for _, r := range []struct {
		v   int
		bit uint64
	}{{2, ll.AccessFSRefer}, {3, ll.AccessFSTruncate}, {5, ll.AccessFSIoctlDev}} {
		if abi >= r.v {
			all |= r.bit
		}
	}
	const rs = 14
	attr := make([]byte, 24)
	binary.NativeEndian.PutUint64(attr[0:], all)
	size := uintptr(8)
	if abi >= 4 {
		binary.NativeEndian.PutUint64(attr[8:], ll.AccessNetBindTCP|ll.AccessNetConnectTCP)
		size = 16
	}
	if abi >= 6 {
		binary.NativeEndian.PutUint64(attr[16:], ll.ScopeAbstractUnixSocket|ll.ScopeSignal)
		size = 24
	}
	p.call("landlock_create_ruleset", unix.SYS_LANDLOCK_CREATE_RULESET, p.ptr(attr), size, 0).save = rs
	read := uint64(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	for i, r := range []struct {
		path   string
		access uint64
	}{{"/usr", read}, {"/etc", read}, {"/proc", read}, {ws, all}, {"/tmp", all}, {"/dev", all}} {
		fd := uintptr(900 + i) // a fixed number, so that the rule's struct is written before the fork
		p.call("open "+r.path, unix.SYS_OPENAT, at, p.str(r.path), unix.O_PATH|unix.O_CLOEXEC).save = 13
		p.call("dup3", unix.SYS_DUP3, 0, fd, unix.O_CLOEXEC).ref[0] = 13
		p.call("close", unix.SYS_CLOSE).ref[0] = 13
		rule := make([]byte, 12) // struct landlock_path_beneath_attr, packed
		binary.NativeEndian.PutUint64(rule[0:], r.access)
		binary.NativeEndian.PutUint32(rule[8:], uint32(fd))
		p.call("landlock rule "+r.path, unix.SYS_LANDLOCK_ADD_RULE, 0, unix.LANDLOCK_RULE_PATH_BENEATH, p.ptr(rule), 0).ref[0] = rs
	}
	p.call("landlock_restrict_self", unix.SYS_LANDLOCK_RESTRICT_SELF, 0, 0).ref[0] = rs

	for _, l := range []struct{ res, n uintptr }{{unix.RLIMIT_NOFILE, 1024}, {unix.RLIMIT_NPROC, 512}, {unix.RLIMIT_CORE, 0}, {unix.RLIMIT_FSIZE, 1 << 30}} {
		lim := make([]byte, 16)
		binary.NativeEndian.PutUint64(lim[0:], uint64(l.n))
		binary.NativeEndian.PutUint64(lim[8:], uint64(l.n))
		p.call("prlimit", unix.SYS_PRLIMIT64, 0, l.res, p.ptr(lim), 0)
	}
	if out >= 0 {
		p.call("stdout", unix.SYS_DUP3, uintptr(out), 1, 0)
		p.call("stderr", unix.SYS_DUP3, uintptr(out), 2, 0)
	}
	p.call("close_range", unix.SYS_CLOSE_RANGE, 3, ^uintptr(0)>>1, unix.CLOSE_RANGE_CLOEXEC)

	filter, err := seccomp.Filter(seccomp.Options{NoExecMemfd: true})
	if err != nil {
		return nil, err
	}
	insns := make([]unix.SockFilter, len(filter))
	for i, f := range filter {
		insns[i] = unix.SockFilter{Code: f.Op, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	prog := &unix.SockFprog{Len: uint16(len(insns)), Filter: &insns[0]}
	p.keep = append(p.keep, insns, prog)
	p.call("seccomp", unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(prog)))

	// Go's signal handlers are this process's: the program starts with the default ones and no
	// signal blocked.
	sa := make([]byte, 32) // struct kernel_sigaction: SIG_DFL, no flags, no restorer, empty mask
	for s := uintptr(1); s <= 64; s++ {
		if s != uintptr(unix.SIGKILL) && s != uintptr(unix.SIGSTOP) {
			p.call("sigaction", unix.SYS_RT_SIGACTION, s, p.ptr(sa), 0, 8).allow = uintptr(unix.EINVAL)
		}
	}
	empty := make([]byte, 8)
	p.call("unblock signals", unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, p.ptr(empty), 0, 8)

	args := make([]uintptr, 0, len(argv)+1)
	for _, a := range argv {
		args = append(args, p.str(a))
	}
	args = append(args, 0)
	envp := []uintptr{p.str("PATH=/usr/bin:/bin"), 0}
	p.keep = append(p.keep, args, envp)
	p.call("execve", unix.SYS_EXECVE, args[0], uintptr(unsafe.Pointer(&args[0])), uintptr(unsafe.Pointer(&envp[0])))
	return p, nil
}

// run forks the child, waits for it and returns the step that failed, if one did.
func (p *rawProgram) run() error {
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		return err
	}
	pid, errno := p.fork(uintptr(pipe[1]))
	unix.Close(pipe[1])
	defer unix.Close(pipe[0])
	if errno != 0 {
		return fmt.Errorf("clone: %w", errno)
	}
	var report [16]byte
	n, _ := unix.Read(pipe[0], report[:]) // EOF: the exec closed the child's end
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	runtime.KeepAlive(p)
	if n == len(report) {
		i := binary.NativeEndian.Uint64(report[0:])
		return fmt.Errorf("child: %s: %w", p.ops[i].what, syscall.Errno(binary.NativeEndian.Uint64(report[8:])))
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return fmt.Errorf("the program ended with %v", ws)
	}
	return nil
}

// fork clones this thread into p.flags's new namespaces with every signal blocked (a Go signal
// handler must not run in the child) and runs p in the child. It returns the child's pid.
func (p *rawProgram) fork(report uintptr) (int, syscall.Errno) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p.mask[0] = ^uint64(0)
	if _, _, e := syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&p.mask[0])), uintptr(unsafe.Pointer(&p.mask[1])), 8, 0, 0); e != 0 {
		return 0, e
	}
	pid, e := rawClone(p, report)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&p.mask[1])), 0, 8, 0, 0)
	return int(pid), e
}

// rawClone is the fork; in the child it never returns.
//
//go:nosplit
//go:norace
func rawClone(p *rawProgram, report uintptr) (uintptr, syscall.Errno) {
	pid, _, e := syscall.RawSyscall6(unix.SYS_CLONE, p.flags, 0, 0, 0, 0, 0)
	if e != 0 || pid != 0 {
		return pid, e
	}
	rawChild(p, report)
	return 0, 0
}

// rawChild runs p's system calls in order; a failure is written to report as (index, errno) and
// ends the child. It runs in a forked copy of a Go process whose runtime is not running: it
// must not allocate, grow its stack or write a pointer.
//
//go:nosplit
//go:norace
func rawChild(p *rawProgram, report uintptr) {
	for i := 0; i < len(p.ops); i++ {
		o := &p.ops[i]
		a := o.args
		for j := 0; j < 6; j++ {
			if r := o.ref[j]; r >= 0 {
				a[j] = p.regs[r&15]
			}
		}
		r, _, e := syscall.RawSyscall6(o.nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if e != 0 && uintptr(e) != o.allow {
			p.msg[0], p.msg[1] = uintptr(i), uintptr(e)
			syscall.RawSyscall6(unix.SYS_WRITE, report, uintptr(unsafe.Pointer(&p.msg[0])), 16, 0, 0, 0)
			syscall.RawSyscall6(unix.SYS_EXIT_GROUP, 127, 0, 0, 0, 0, 0)
		}
		if o.save >= 0 {
			p.regs[o.save&15] = r
		}
	}
	syscall.RawSyscall6(unix.SYS_EXIT_GROUP, 126, 0, 0, 0, 0, 0)
}
