package nsinit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/clihost/clihost/internal/kernfile"
	"github.com/clihost/clihost/internal/spawn"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/seccomp"
	"golang.org/x/sys/unix"
)

// The zygote is a clihost-sandbox process started once (see zygote.go) that builds each call's
// sandbox without starting a Go program for it. For every call it receives the plan with the
// call's descriptors and runs serveCall on a new goroutine locked to a thread of its own, which
// the runtime ends with the call:
//
//  1. The thread unshares new mount, PID, IPC, UTS and cgroup namespaces for itself alone, and
//     clones the call's PID 1 (rawProgram, no Go runtime) in the network namespace of every PID 1,
//     which holds nothing; PID 1 mounts /proc for the new PID namespace (the thread is not in it),
//     drops its privileges and reaps orphans until the thread tells it to exit. The thread then
//     enters the call's network namespace: a new one, or one an earlier call of the same key left
//     clean (zygote_net.go).
//  2. It builds the mount namespace with the init's own code (prepareNamespaces, with PID 1's
//     start as its /proc step, openPlan, buildNamespaces); with Plan.Egress it makes the egress
//     listeners in the call's network namespace and sends them to the host, as an init does
//     (sendListeners). Then it confines itself as the init's forking thread does (Landlock,
//     identity, capabilities, seccomp), checked with system calls.
//  3. It clones the program's process from itself (CLONE_VM, a rawProgram that joins the cgroups,
//     sets the rlimits, installs the streams and execs), which starts with exactly the thread's
//     state, in the new PID namespace; the thread waits for the program's end in wait4 (not
//     CLONE_VFORK, whose wait would hold the Go runtime's P through a hanging exec), then reads a
//     close-on-exec pipe on which a child that failed before its exec said why.
//  4. Once the program has ended, it has PID 1 exit (the kernel then kills and reaps whatever is
//     left in the namespace before PID 1's exit completes), writes the end line, and waits until
//     the host closed the report pipe before it reaps PID 1, so that PID 1's pid, which the host
//     signals, is not reused while the host may still use it.
//
// The report pipe carries the same lines as an init's ("step: error", limit notes, "end N"),
// preceded by "pid N": PID 1's pid in the host's PID namespace. A watch on the report pipe kills
// PID 1 (and so the sandbox) when the host closes it early or dies, and when the deadline passes.
//
// The zygote runs as root in the host's namespaces and holds no secret of the host: what it
// learns is the plans, and each plan's process (and PID 1, a copy of the zygote's memory) cannot
// read another process's memory (not dumpable, no capability, seccomp refuses ptrace). A host that
// is not root starts it in a user namespace of its own that maps only the host user and group (to
// 0): its threads have the capabilities the other namespaces need there; PID 1 and the program
// keep uid 0 of that namespace (the host user) without any capability, and the seccomp filter
// seals memfds in place of vm.memfd_noexec, which a user namespace cannot set, as in an init's.

// zygoteMarker is argv[1] of the zygote.
const zygoteMarker = "__clihost_zygote"

// zygoteFD is the zygote's end of its socket pair with the host.
const zygoteFD = 3

// zygoteHeader is the body of a request message; its descriptors are, in order, the plan pipe's
// read end, the report pipe's write end, the program's standard output and error, its standard
// input when Stdin (else the program reads the sandbox's /dev/null), the zygote's end of the
// egress socket pair when Egress (the plan has Egress: the listeners go to the host on it), the
// read end of the gate pipe when Gate (the program starts once the host wrote gateOpen to it),
// Tasks descriptors of the call's cgroup v1 tasks files and, when Dir, one of its cgroup v2
// directory. A request with Build (and nothing else set) is not a call: it asks for a sandbox
// built ahead (zygote_ahead.go), and carries the plan pipe's read end and the zygote's end of
// the sandbox's own socket pair.
type zygoteHeader struct {
	Stdin  bool
	Egress bool
	Gate   bool
	Tasks  int
	Dir    bool
	Build  bool
}

// split names the descriptors of a request with header h, or reports false when their number is
// not what h says.
func (h zygoteHeader) split(fds []int) (*zcall, bool) {
	if h.Build {
		if len(fds) != 2 || h != (zygoteHeader{Build: true}) {
			return nil, false
		}
		c := newZcall()
		c.plan, c.conn = fds[0], fds[1]
		return c, true
	}
	want := 4 + h.Tasks
	for _, one := range []bool{h.Stdin, h.Egress, h.Gate, h.Dir} {
		if one {
			want++
		}
	}
	if h.Tasks < 0 || len(fds) != want {
		return nil, false
	}
	c := newZcall()
	c.plan, c.report, c.stdout, c.stderr = fds[0], fds[1], fds[2], fds[3]
	rest := fds[4:]
	if h.Stdin {
		c.stdin, rest = rest[0], rest[1:]
	}
	if h.Egress {
		c.egress, rest = rest[0], rest[1:]
	}
	if h.Gate {
		c.gate, rest = rest[0], rest[1:]
	}
	c.tasks = rest[:h.Tasks]
	if h.Dir {
		c.cgroupDir = rest[h.Tasks]
	}
	return c, true
}

// newZcall is a zcall with nothing in it yet.
func newZcall() *zcall {
	return &zcall{plan: -1, report: -1, stdout: -1, stderr: -1, stdin: -1, egress: -1, gate: -1, cgroupDir: -1,
		conn: -1, pid1: -1, pid1fd: -1, ctlW: -1, pid1Report: -1, pid1Children: -1}
}

// take moves the request's descriptors from req (split's) into c.
func (c *zcall) take(req *zcall) {
	c.plan, c.report, c.stdout, c.stderr, c.stdin = req.plan, req.report, req.stdout, req.stderr, req.stdin
	c.egress, c.gate, c.tasks, c.cgroupDir, c.conn = req.egress, req.gate, req.tasks, req.cgroupDir, req.conn
}

// zygoteReady and zygoteUnsupported start the zygote's first message: it can build sandboxes, or
// it cannot on this kernel (the rest of the message says why).
const (
	zygoteReady       = "ready"
	zygoteUnsupported = "unsupported: "
)

// zygoteDone is the zygote's last message: the host closed its end, and every call has ended or
// been let go by its host. The zygote exits after it.
const zygoteDone = "done"

// runZygote is the zygote's main loop. It returns its exit status.
func runZygote() int {
	// The main thread stays in the host's namespaces, as it started: no other goroutine runs on
	// it, so none can unshare it (a thread that ends locked is killed, but the main thread
	// cannot be). /proc/PID/mountinfo, which the zygote compares to see the host's mount table
	// change, shows the main thread's.
	runtime.LockOSThread()
	if tid, pid := unix.Gettid(), unix.Getpid(); tid != pid {
		// Another goroutine could end locked on the main thread and freeze /proc/self's mount
		// table in its namespace (see the package's init).
		return fail(exitFailure, "zygote", fmt.Errorf("runs on thread %d, not the process's main thread", tid))
	}
	// Its clones that take a call's uid share its memory: no ptrace of them, no /proc/PID/mem
	// (see dumpable.go for the moment after their uid change).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail(exitFailure, "zygote: not dumpable", err)
	}
	userNS := inUserNamespace()
	hello := zygoteReady
	if err := probeZygote(userNS); err != nil {
		hello = zygoteUnsupported + err.Error()
	}
	if _, err := unix.Write(zygoteFD, []byte(hello)); err != nil || hello != zygoteReady {
		return 0
	}
	// Ready threads wait in a blocking recvmsg (receive), which the kernel wakes one at a time for
	// a request; the timeout has each look at the host's mount table once in a while.
	if err := unix.SetsockoptTimeval(zygoteFD, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: int64(zygoteIdle / time.Second)}); err != nil {
		return fail(exitFailure, "zygote: receive timeout", err)
	}
	proc, err := unix.Open("/proc/self", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(exitFailure, "zygote: /proc/self", err)
	}
	z := &zserver{mounts: mountTable{proc: proc}, userNS: userNS, suidDumpable: -1, nets: newNetPool(proc), ownPIDs: ownPIDs(proc)}
	if !userNS {
		if z.suidDumpable, err = openSuidDumpable(); err != nil {
			return fail(exitFailure, "zygote", err)
		}
	}
	z.cond = sync.NewCond(&z.mu)
	z.serve()
	_, _ = unix.Write(zygoteFD, []byte(zygoteDone))
	return 0
}

// A zserver keeps zygoteWarm threads ready for calls: each has unshared its namespaces, started its
// PID 1 and built what does not depend on the plan (prepareNamespaces), and waits in recvmsg for a
// call itself (no hand-off between threads on a call's path). The thread that takes a call starts
// its replacement. A thread whose mount namespace is a copy of a host mount table that has changed
// since (as with a Pool's inits) passes its call to a new thread, made for it.
type zserver struct {
	mounts mountTable
	userNS bool // the zygote runs in a user namespace of its own (the host is not root)
	// suidDumpable is a descriptor of fs.suid_dumpable, checked before each program's process
	// takes its call's uid (checkSuidDumpable); -1 in a user namespace, where none does.
	suidDumpable int
	nets         *netPool // the network namespaces kept between calls (zygote_net.go)
	// ownPIDs says the procfs the zygote's /proc/self is in numbers processes as the zygote's PID
	// namespace does (see ownPIDs): a pid clone returned names the same process there.
	ownPIDs bool

	mu   sync.Mutex
	cond *sync.Cond // on mu: broadcast when eof, busy or released change
	eof  bool       // the host closed its end: no thread is started any more
	busy int        // the threads started that have not ended
	// released counts the busy threads whose call's host has let it go (closed its report pipe):
	// the host no longer waits for them, and a thread that hangs in the kernel is one of them.
	released int
}

// zygoteWarm is how many threads the zygote keeps ready.
const zygoteWarm = 2

// zygoteIdle is how long a ready thread waits for a call before it looks at the host's mount table
// again (a thread whose copy went stale ends, see ready).
const zygoteIdle = time.Second

// serve starts the ready threads and returns once the host has closed its end and every thread
// has ended or serves a call its host has let go (a host that died closed its report pipes too,
// which ends their calls at once). Not every thread: one that hangs in the kernel for good (a
// FUSE server that never answers its request) would keep the zygote forever.
func (z *zserver) serve() {
	for range zygoteWarm {
		z.start()
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	for !z.eof || z.busy > z.released {
		z.cond.Wait()
	}
}

// start starts a thread that makes itself ready, unless the host has closed its end.
func (z *zserver) start() {
	z.mu.Lock()
	eof := z.eof
	z.mu.Unlock()
	if !eof {
		z.spawn(z.ready)
	}
}

// spawn runs f on a new goroutine (which f locks to its thread) and counts it busy until f returns
// the call it served (nil: none). (It is called by a busy thread or before serve waits: the
// zygote cannot have exited.)
func (z *zserver) spawn(f func() *zcall) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.busy++
	go func() {
		c := f()
		z.mu.Lock()
		defer z.mu.Unlock()
		z.busy--
		if c != nil {
			if c.released {
				z.released--
			}
			c.ended = true
		}
		z.cond.Broadcast()
	}()
}

// release records that the host has let c go (closed its report pipe), unless its thread ended.
func (z *zserver) release(c *zcall) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if !c.ended && !c.released {
		c.released = true
		z.released++
		z.cond.Broadcast()
	}
}

// retain undoes release for c: its host waits for it again (a sandbox built ahead took its call).
func (z *zserver) retain(c *zcall) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if c.released {
		c.released = false
		z.released--
	}
}

// table reads the host's mount table (a copy: the buffer is shared).
func (z *zserver) table() ([]byte, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	t, err := z.mounts.read()
	return bytes.Clone(t), err
}

// ready makes the calling goroutine's thread ready for a call, waits for one, starts its
// replacement and serves the call: on this thread when its namespaces are current, else on a new
// one. A thread whose namespaces went stale while it waited (checked once a second) ends and
// starts its replacement, so that it does not keep a file system the host unmounted. It returns
// the thread's zcall (see spawn).
func (z *zserver) ready() *zcall {
	runtime.LockOSThread() // never unlocked: the thread's namespaces and credentials end with it
	c := newZcall()
	c.z = z
	before, err := z.table()
	step := "mount table"
	if err == nil {
		step, err = c.prepare()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "clihost sandbox: zygote: %s: %v\n", step, err)
	}
	// The table read before and after the unshare must agree: a mount made and undone in between
	// could be in the copy, where it would stay (and be shown to the call) after the host
	// unmounted it.
	if after, err2 := z.table(); err == nil && (err2 != nil || !bytes.Equal(before, after)) {
		c.finish()
		z.start()
		return c
	}
	current := func() bool {
		now, err2 := z.table()
		return err == nil && err2 == nil && bytes.Equal(before, now)
	}
	for {
		req, st := z.receive()
		switch {
		case st == received && current():
			z.start()
			c.take(req)
			if c.conn >= 0 {
				c.serveAhead(before)
			} else {
				c.serveCall()
			}
			return c
		case st == received:
			z.start()
			c.finish()
			if req.conn >= 0 {
				req.finish() // not built on a stale copy: the host sees its end closed
			} else {
				z.fresh(req)
			}
			return c
		case st == closed:
			c.finish()
			return c
		case err != nil || !current():
			c.finish()
			z.start()
			return c
		}
	}
}

// fresh serves req on a new thread, made ready for it.
func (z *zserver) fresh(req *zcall) {
	z.spawn(func() *zcall {
		runtime.LockOSThread() // never unlocked: the thread's namespaces and credentials end with it
		c := newZcall()
		c.z = z
		c.take(req)
		if step, err := c.prepare(); err != nil {
			c.report1(step, err, exitFailure)
			c.finish()
			return c
		}
		c.serveCall()
		return c
	})
}

// What receive found.
const (
	received = iota // a request
	idle            // none within the timeout
	closed          // the host closed its end
)

// receive waits at most zygoteIdle (the socket's receive timeout) for the host's next request
// and returns its descriptors. A malformed request is dropped (its descriptors closed). Every
// ready thread waits here, in recvmsg: the kernel wakes one of them for a request (a waiter on a
// SOCK_SEQPACKET socket waits exclusively), and all of them when the host closes its end.
func (z *zserver) receive() (*zcall, int) {
	req, st := receiveRequest(zygoteFD, true)
	if st == closed {
		z.mu.Lock()
		z.eof = true
		z.cond.Broadcast()
		z.mu.Unlock()
	}
	return req, st
}

// receiveRequest waits for the next request on the SOCK_SEQPACKET socket fd, as long as its
// receive timeout allows, and returns its descriptors. A malformed request is dropped (its
// descriptors closed) and the wait goes on; so is one asking for a sandbox built ahead unless
// build.
func receiveRequest(fd int, build bool) (*zcall, int) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(64*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return nil, idle
		case err != nil || n == 0 && oobn == 0:
			return nil, closed
		}
		rights, err := unixRights(oob[:oobn])
		if err != nil {
			closeAll(rights)
			continue
		}
		var h zygoteHeader
		if err := json.Unmarshal(buf[:n], &h); err != nil || h.Build && !build {
			closeAll(rights)
			continue
		}
		if req, ok := h.split(rights); ok {
			return req, received
		}
		closeAll(rights)
	}
}

// probeZygote checks what every call needs from the kernel and the host beyond what Check does,
// by making one thread ready as for a call (zcall.prepare) on a thread of its own: new namespaces,
// PID 1 (which mounts /proc for its PID namespace and, outside a user namespace, sets
// vm.memfd_noexec, which a service manager may have made read-only: ProtectKernelTunables=), the
// plan-independent mounts.
func probeZygote(userNS bool) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends in its own namespaces
		c := newZcall()
		c.z = &zserver{userNS: userNS}
		step, err := c.prepare()
		c.finish()
		if err != nil {
			err = fmt.Errorf("%s: %w", step, err)
		}
		errc <- err
	}()
	return <-errc
}

// pipe returns a close-on-exec pipe's read and write ends.
func pipe() (r, w int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, -1, fmt.Errorf("pipe: %w", err)
	}
	return p[0], p[1], nil
}

// sigset is a kernel sigset_t (8 bytes) holding sigs.
func sigset(sigs ...syscall.Signal) []byte {
	var set uint64
	for _, s := range sigs {
		set |= 1 << (uint(s) - 1)
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&set)), 8)[:8:8]
}

// zcall is one call the zygote serves: the descriptors it received (each -1 once closed) and what
// its thread made.
type zcall struct {
	plan, report, stdout, stderr, stdin int   // stdin -1: the sandbox's /dev/null
	egress                              int   // the egress socket pair's end (Plan.Egress), or -1
	gate                                int   // the gate pipe's read end (zygoteHeader.Gate), or -1
	tasks                               []int // the call's cgroup v1 tasks files
	cgroupDir                           int   // the call's cgroup v2 directory, or -1
	conn                                int   // a sandbox built ahead: its socket (zygoteHeader.Build), or -1

	z        *zserver // the zygote serving it (nil for a request not yet taken by a thread)
	released bool     // its host let it go (zserver.release); under z.mu
	ended    bool     // its thread ended; under z.mu

	pid1, pid1fd int         // -1 until PID 1 exists
	pid1Prog     *rawProgram // PID 1's program, to name its failure
	ctlW         int         // PID 1's control pipe: closing it ends PID 1
	pid1Report   int         // PID 1's failure, or one byte once it is ready
	// pid1Children is PID 1's list of children (/proc/PID/task/PID/children in the host's procfs,
	// opened before the thread was confined), or -1.
	pid1Children int
	// filtered says the program ran under the seccomp filter, which refuses CLONE_PARENT: every
	// process it started is a descendant of PID 1 once it exited (see sandboxEmpty).
	filtered bool
	// seal says the program's seccomp filter must seal memfds (sealMemfds; read when the
	// thread made itself ready, its PID namespace inheriting the zygote's vm.memfd_noexec).
	seal     bool
	hostDone chan struct{}
	// net is the network namespace the thread is in once prepared, the call's (see zygote_net.go);
	// nil without a pool.
	net *netns
}

// serveCall serves the call on c's thread, prepared (see the comment at the top of this file),
// and closes every descriptor it was given.
func (c *zcall) serveCall() {
	e, err := readPlan(c.plan)
	c.plan = -1 // readPlan closed it
	if err != nil {
		c.report1("init: plan", err, exitFailure)
		c.finish()
		return
	}
	c.hostDone = make(chan struct{})
	go c.watch(c.report, e.Deadline)
	c.line("pid " + strconv.Itoa(c.pid1))
	code := exitFailure
	step, err := c.serve(e, &code)
	c.report1(step, err, code)
	c.finish()
}

// maxFailureLine bounds the failure line of a call's report, in bytes.
const maxFailureLine = 2048

// report1 ends the call's report: the failure of step (when err is not nil, also on the program's
// standard error), the end of the program's streams, and, once PID 1 exists, the end line.
func (c *zcall) report1(step string, err error, code int) {
	if err != nil {
		line := fmt.Sprintf("%s: %v", step, err)
		if len(line) > maxFailureLine {
			// Whole in the host's read of it (readPID reads 4 KiB), and never more than a pipe
			// holds: the thread must not wait for a host that stopped reading.
			line = strings.ToValidUTF8(line[:maxFailureLine], "") + " …"
		}
		if c.stderr >= 0 {
			_, _ = unix.Write(c.stderr, []byte("clihost sandbox: "+line+"\n"))
		}
		c.line(line)
	}
	// The host reads the program's streams to their end once it has the end line, and stops
	// waiting for listeners that were not sent.
	for _, fd := range []*int{&c.stdin, &c.stdout, &c.stderr, &c.egress, &c.gate} {
		closeFD(fd)
	}
	if c.pid1 >= 0 && c.hostDone != nil {
		// The end line says nothing of the sandbox runs any more (the host sweeps the workspace
		// after it). When the program left nothing behind (sandboxEmpty) that is so at once, and
		// PID 1's exit is not waited for first: it runs no code of the call's. Otherwise PID 1
		// exits first, and its exit completes once the kernel has killed and reaped everything else
		// in its PID namespace. Either way it stays a zombie, its pid kept, until finish reaps it.
		// After the "pid" line the host reads the report until the end line, a failure's too.
		end := endLine + strconv.Itoa(code)
		empty := c.sandboxEmpty()
		if empty {
			c.line(end)
		}
		closeFD(&c.ctlW)
		c.awaitPID1Exit()
		if !empty {
			c.line(end)
		}
	}
}

// ownPIDs reports whether the procfs holding proc, the zygote's /proc/self, is one of the zygote's
// own PID namespace: NSpid in its status lists one pid only (it lists the pids from the procfs's
// namespace down to the process's own). A procfs of a parent namespace (a host in a PID namespace
// that kept its parent's /proc) names processes by other numbers: a pid the zygote's clone
// returned would name another process there.
func ownPIDs(proc int) bool {
	status, err := kernfile.AppendAt(nil, proc, "status")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(status)) {
		if pids, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return len(strings.Fields(pids)) == 1
		}
	}
	return false
}

// sandboxEmpty reports whether nothing of the call runs any more in its sandbox but PID 1, once
// its program has been waited for: PID 1 has no child, living or not yet reaped. Every process
// the program started is then gone: when a process exits, the kernel gives its children to PID 1
// before its parent can wait for it, so a living descendant of the program has a chain of living
// parents up to a child of PID 1 (the program itself was the thread's child, waited for). Not so
// for a program without the seccomp filter, whose clone(CLONE_PARENT) makes a child of the thread
// (see awaitPID1Exit): it, and a PID 1 whose children cannot be read, gets the slow way.
func (c *zcall) sandboxEmpty() bool {
	if !c.filtered || c.pid1Children < 0 {
		return false
	}
	var buf [64]byte
	for {
		n, err := unix.Pread(c.pid1Children, buf[:], 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return false
		}
		return n == 0
	}
}

// awaitPID1Exit waits until the call's PID 1 has exited, not reaping it. Its exit completes only
// once every other process of its PID namespace is reaped, and a process made by the program's
// clone(CLONE_PARENT) (the seccomp filter refuses it, but a plan may go without the filter) is a
// child of this thread's, as the program and PID 1 are: so it waits for any exited child of this
// thread alone (__WNOTHREAD: the other threads' children are other calls'), and reaps every one
// but PID 1.
func (c *zcall) awaitPID1Exit() {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOWAIT|unix.WALL|unix.WNOTHREAD, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return
		}
		pid := int(*(*int32)(unsafe.Add(unsafe.Pointer(&info), siginfoPID)))
		if pid == c.pid1 {
			return
		}
		for {
			if _, err := unix.Wait4(pid, nil, unix.WALL|unix.WNOTHREAD, nil); !errors.Is(err, unix.EINTR) {
				break
			}
		}
	}
}

// siginfoPID is the offset of si_pid in a siginfo_t of SIGCHLD (after si_signo, si_errno, si_code
// and the union's alignment).
const siginfoPID = 16

// line writes s and a newline to the report pipe.
func (c *zcall) line(s string) { _, _ = unix.Write(c.report, []byte(s+"\n")) }

// closeFD closes *fd unless it is closed already, and marks it closed.
func closeFD(fd *int) {
	if *fd >= 0 {
		unix.Close(*fd)
		*fd = -1
	}
}

// prepare builds on the calling thread, locked to its goroutine, what does not depend on the
// plan: new namespaces, PID 1, and the plan-independent mounts (prepareNamespaces). On failure it
// returns the failed step.
func (c *zcall) prepare() (string, error) {
	c.seal = sealMemfds(c.z.userNS)
	// Not CLONE_NEWCGROUP yet: while the thread waits for its call, its reads of the host's
	// mount table must show the cgroup mounts as the zygote's do (serve unshares it).
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS); err != nil {
		return "unshare", err
	}
	// PID 1 starts in the network namespace of every PID 1, the program later in the call's (see
	// zygote_net.go).
	if err := c.z.nets.enterEmpty(); err != nil {
		return "network: namespace", err
	}
	if step, err := prepareNamespaces(c.startPID1); err != nil {
		return step, err
	}
	var step string
	var err error
	if c.net, step, err = c.z.nets.enterFresh(); err != nil {
		return step, err
	}
	// The bounding set is emptied here, off the call's path (the thread's effective capabilities,
	// which the call's mounts need, are not bounded by it); serve relies on it (confineThread).
	if err := dropBoundingSet(); err != nil {
		return "privileges", err
	}
	if err := checkBoundingSetEmpty(); err != nil {
		return "verify", err
	}
	return "", nil
}

// serve builds the rest of the sandbox for the call's plan on the prepared thread (build), runs
// the program in it and sets *code to its status (run); on failure it returns the failed step.
func (c *zcall) serve(e envelope, code *int) (string, error) {
	if _, step, err := c.build(e, false, code); err != nil {
		return step, err
	}
	return c.run(e, code)
}

// build builds the rest of the sandbox for the plan of e on the prepared thread, and confines the
// thread; with ahead, for a call still to come (serveAhead), and it returns what the sandbox was
// built from (aheadSandbox). On failure it returns the failed step, and sets *code to exitVerify
// when the confinement failed.
func (c *zcall) build(e envelope, ahead bool, code *int) (*aheadSandbox, string, error) {
	p := e.Plan
	switch {
	case len(p.Ingress) > 0:
		return nil, "zygote", errors.New("the plan needs the init (ingress)")
	case e.UserNS != c.z.userNS:
		return nil, "zygote", fmt.Errorf("the plan's user namespace (%t) is not the zygote's (%t)", e.UserNS, c.z.userNS)
	case ahead && p.Egress:
		return nil, "zygote", errors.New("a sandbox with egress is not built ahead (its listeners are the call's)")
	case p.Egress != (c.egress >= 0):
		return nil, "zygote", errors.New("the plan's egress and the request's socket pair disagree")
	case p.Egress:
		// Refused before the host gets listeners for a sandbox that could not be confined.
		if _, err := landlockConfig(netEgress); err != nil {
			return nil, "landlock", err
		}
	}
	if c.net != nil {
		if !p.Egress { // an egress call's listeners are its own: its namespace is not used again
			key := networkKey(p)
			if err := c.z.nets.reuse(&c.net, key); err != nil {
				return nil, "network: namespace", err
			}
			c.net.key = key
		}
		c.net.used = true
	}
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return nil, "unshare cgroup namespace", err
	}
	unix.Umask(e.HostUmask)
	paths, err := openPlan(p)
	if err != nil {
		return nil, "resolve", err
	}
	defer paths.close()
	var b *aheadSandbox
	if ahead {
		b = newAheadSandbox(e, paths)
		defer func() {
			if b.unfinished {
				b.close()
				closeSplit(&paths.split)
			}
		}()
	}
	// Not vm.memfd_noexec here: it is set for the writer's PID namespace, here the zygote's.
	// PID 1 sets it (pid1Program).
	if step, err := buildNamespaces(p, paths, false); err != nil {
		return nil, step, err
	}
	if p.Egress {
		// On the thread, in the call's network namespace; sent before the thread is confined.
		err := sendListeners(c.egress)
		c.egress = -1 // sendListeners closed it
		if err != nil {
			return nil, "network: egress listeners", err
		}
	}
	if c.stdin < 0 {
		if c.stdin, err = unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0); err != nil {
			return nil, "stdin", err
		}
	}
	if ahead {
		// Before the thread is confined: it could not open these files after.
		if err := b.openTable(c.z.mounts.proc); err != nil {
			return nil, "ahead: mount table", err
		}
	}
	if step, err := confineThread(p, paths); err != nil {
		*code = exitVerify
		return nil, step, err
	}
	if ahead {
		if err := b.finish(paths); err != nil {
			return nil, "ahead", err
		}
	}
	return b, "", nil
}

// run runs the program of the plan of e in the sandbox the thread built and confined itself in,
// once the host opened the call's gate (if any), and sets *code to its status; on failure it
// returns the failed step.
func (c *zcall) run(e envelope, code *int) (string, error) {
	p := e.Plan
	rlimits, err := childRlimits(e.HostRlimits, p.Limits)
	if err != nil {
		return "rlimits", err
	}
	seal := p.NoExecMemfd && c.seal
	if c.gate >= 0 {
		// What the host must do before the program runs (the git rule's snapshot of the writable
		// roots) ran while the sandbox was built: the program starts on the host's word only.
		err := awaitGate(c.gate)
		closeFD(&c.gate)
		if err != nil {
			return "gate", err
		}
	}
	if c.z.suidDumpable >= 0 {
		// The program's process is about to take the call's uid while it shares this memory.
		if err := checkSuidDumpable(c.z.suidDumpable); err != nil {
			return "privileges", err
		}
	}
	c.filtered = p.Seccomp
	status, err := c.runProgram(p, rlimits, seal)
	if err != nil {
		// The program's process confines itself before it execs (dropIdentity, the seccomp
		// filter's check): a failure there is the sandbox's, as the init's verify is.
		var f *rawFailure
		if errors.As(err, &f) {
			if step, what, _ := strings.Cut(f.Op, ": "); step == "privileges" || step == "verify" {
				*code = exitVerify
				return step, fmt.Errorf("%s: %w", what, f.Err)
			}
		}
		return "exec " + p.Path, err
	}
	*code = status
	reportLimits(c.report, p.Limits, syscall.Signal(max(*code-128, 0)))
	return "", nil
}

// startPID1 clones the call's PID 1 into the thread's new PID namespace, makes it the leader of
// its own process group (the host signals the group; the program joins it) and waits until it is
// ready (pid1Program): it has mounted /proc for its PID namespace, which the thread is not in. It
// is prepareNamespaces's step for /proc, after / was made private: the mount stays in the
// thread's mount namespace, which PID 1 shares.
func (c *zcall) startPID1() error {
	ctlR, ctlW, err := pipe()
	if err != nil {
		return fmt.Errorf("PID 1: %w", err)
	}
	defer unix.Close(ctlR)
	c.ctlW = ctlW
	repR, repW, err := pipe()
	if err != nil {
		return fmt.Errorf("PID 1: %w", err)
	}
	c.pid1Report = repR
	c.pid1Prog = pid1Program(ctlR, repW, c.z.userNS)
	pid, pidfd, err := c.pid1Prog.start(false, -1, repW)
	unix.Close(repW)
	if err != nil {
		return fmt.Errorf("PID 1: %w", err)
	}
	c.pid1, c.pid1fd = pid, pidfd
	if err := unix.Setpgid(c.pid1, c.pid1); err != nil {
		return fmt.Errorf("PID 1: process group: %w", err)
	}
	if err := c.awaitPID1(); err != nil {
		return fmt.Errorf("PID 1: %w", err)
	}
	if c.z.ownPIDs {
		// Through the zygote's /proc/self (the host's procfs): the thread's /proc is the sandbox's
		// now, and once confined it may open nothing of the host's. Without it (a kernel without
		// CONFIG_PROC_CHILDREN, a procfs of another PID namespace) every call ends the slow way.
		pid := strconv.Itoa(c.pid1)
		c.pid1Children, _ = unix.Openat(c.z.mounts.proc, "../"+pid+"/task/"+pid+"/children", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	return nil
}

// reaperProgram is a PID 1 that dies with the thread that forked it, keeps only its control
// pipe's read end ctl (and keep), and reaps until ctl is closed.
func reaperProgram(ctl int, keep ...int) *rawProgram {
	prog := &rawProgram{reap: true, reapCtl: uintptr(ctl)}
	prog.call("parent death signal", unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL))
	prog.closeAllBut(slices.Sorted(slices.Values(append(keep, ctl)))...)
	prog.call("close standard streams", unix.SYS_CLOSE_RANGE, 0, 2, 0)
	prog.call("signalfd", unix.SYS_SIGNALFD4, ^uintptr(0), prog.ptr(sigset(unix.SIGCHLD)), 8, unix.SFD_CLOEXEC).save = reapSig
	return prog
}

// pid1Program is PID 1's program: a reaperProgram that also keeps its report pipe, mounts at /proc
// a procfs of its PID namespace (nosuid, nodev, noexec; as an init does, mountOwnProc), sets
// vm.memfd_noexec to 2 through it (not in a user namespace, userNS, where it cannot be set: the
// program's seccomp filter seals memfds instead), drops every capability and supplementary group
// (locked securebits, so that none comes back), no_new_privs, not dumpable, and says on the report
// pipe that it is ready. It keeps uid and gid 0 (of the user namespace, with userNS): no process
// of another uid may signal or trace it, where a uid of its own (it was 65534) let every process of
// that uid on the host kill every call's sandbox. Changing no id, it never makes the memory it
// shares with the zygote dumpable (dumpable.go), and keeps its parent-death signal. Nothing in it
// depends on the plan: it is started before the plan is known.
func pid1Program(ctl, report int, userNS bool) *rawProgram {
	prog := reaperProgram(ctl, report)
	prog.call("mount /proc", unix.SYS_MOUNT, prog.str("proc"), prog.str("/proc"), prog.str("proc"),
		unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, 0)
	if !userNS {
		// Per PID namespace, the writer's: PID 1's is the sandbox's, and the program and
		// everything it starts inherit it. Through the fresh /proc, which a service manager's
		// read-only /proc/sys (ProtectKernelTunables=) does not cover.
		cwd := unix.AT_FDCWD
		prog.call("sysctl vm.memfd_noexec", unix.SYS_OPENAT, uintptr(cwd), prog.str(memfdNoexecSysctl),
			unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0).save = sysctlReg
		write := prog.call("sysctl vm.memfd_noexec", unix.SYS_WRITE, 0, prog.ptr([]byte("2")), 1)
		write.ref[0] = sysctlReg
		prog.call("sysctl vm.memfd_noexec", unix.SYS_CLOSE, 0).ref[0] = sysctlReg
		prog.call("setgroups", unix.SYS_SETGROUPS, 0, 0)
	}
	prog.call("securebits", unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, lockedSecurebits, 0, 0, 0)
	prog.call("clear ambient capabilities", unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	// The permitted, effective and inheritable sets emptied: PID 1 never execs, and cannot gain a
	// capability back.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	hdrBytes := unsafe.Slice((*byte)(unsafe.Pointer(&hdr)), unsafe.Sizeof(hdr))
	prog.call("capabilities", unix.SYS_CAPSET, prog.ptr(hdrBytes), prog.ptr(make([]byte, unsafe.Sizeof([2]unix.CapUserData{}))))
	prog.call("no_new_privs", unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	prog.call("not dumpable", unix.SYS_PRCTL, unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	prog.call("ready", unix.SYS_WRITE, uintptr(report), prog.ptr([]byte{'r'}), 1)
	prog.call("close report", unix.SYS_CLOSE, uintptr(report))
	return prog
}

// sysctlReg is the register that holds PID 1's descriptor of vm.memfd_noexec.
const sysctlReg = 0

// watch ends the sandbox (SIGKILL to PID 1) when the host closes the report pipe or dies, or the
// deadline (CLOCK_BOOTTIME nanoseconds, 0 for none) passes; it closes c.hostDone once the host's
// end is closed. It runs on a thread of the zygote's own, which may signal PID 1.
func (c *zcall) watch(report int, deadline int64) {
	defer close(c.hostDone)
	for {
		timeout := -1
		if deadline != 0 {
			now, err := bootTime()
			if err != nil || now >= deadline {
				_ = unix.PidfdSendSignal(c.pid1fd, unix.SIGKILL, nil, 0)
				deadline = 0
				continue
			}
			timeout = int((deadline-now)/int64(time.Millisecond)) + 1
		}
		gone, err := hostGone(report, timeout)
		if err != nil || gone {
			_ = unix.PidfdSendSignal(c.pid1fd, unix.SIGKILL, nil, 0)
			c.z.release(c)
			return
		}
	}
}

// awaitPID1 waits until PID 1 reports that it is ready (one byte) or failed (its op and errno).
func (c *zcall) awaitPID1() error {
	var buf [16]byte
	n, err := readFull(c.pid1Report, buf[:])
	closeFD(&c.pid1Report)
	switch {
	case n == 1 && buf[0] == 'r':
		return nil
	case n == len(buf):
		return c.pid1Prog.failure(buf[:])
	case err != nil:
		return err
	default:
		return errors.New("PID 1 exited")
	}
}

// gateOpen is what the host writes to a call's gate pipe to let its program start.
const gateOpen = 'g'

// awaitGate waits until the host writes gateOpen to the gate pipe fd. Anything else (the host
// closed it: it refused the call, or died) is an error: the program must not start.
func awaitGate(fd int) error {
	var b [1]byte
	n, err := readFull(fd, b[:])
	switch {
	case err != nil:
		return err
	case n != 1 || b[0] != gateOpen:
		return errors.New("the host refused the call before its program started")
	}
	return nil
}

// readFull reads into buf until it is full or the end of the file.
func readFull(fd int, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return n, err
		case m == 0:
			return n, nil
		}
		n += m
	}
	return n, nil
}

// runProgram clones the program's process from the confined thread, which execs it (see
// programFor), closes the thread's copies of the program's streams, so that the host sees their
// end when the program's copies close, and waits for it: it returns its status (see waitProgram),
// or the error of the op that failed before the exec.
//
// The thread waits for the process's end only, not for its exec first: one wake-up of the thread
// a call, not two. Whether it exec'd is read after its end, from a pipe whose end is close-on-exec
// in the child (errW): a child that failed wrote (op index, errno) to it before it exited.
func (c *zcall) runProgram(p isolation.Plan, rlimits []rlimit, seal bool) (int, error) {
	errR, errW, err := pipe()
	if err != nil {
		return 0, err
	}
	defer unix.Close(errR)
	prog, err := c.programFor(p, rlimits, seal, errW)
	if err != nil {
		unix.Close(errW)
		return 0, err
	}
	// Not CLONE_VFORK: its wait is inside the raw clone, which keeps this thread's P from the Go
	// runtime (no other goroutine runs on it, and the world cannot stop) for as long as the exec
	// takes, and an exec can hang (its file on a FUSE or NFS mount that does not answer). The
	// thread waits in wait4 instead, which gives the P back. prog and the child's stack stay
	// until the child is gone (release).
	pid, pidfd, err := prog.start(false, c.cgroupDir, errW)
	unix.Close(errW)
	for _, fd := range []*int{&c.stdin, &c.stdout, &c.stderr} {
		closeFD(fd)
	}
	defer prog.release()
	if err != nil {
		if c.pid1Exited() {
			// The sandbox was killed (its deadline passed, or the host killed its process group)
			// while it was built: the clone into its dead PID namespace fails (ENOMEM). That is
			// the call's end, not a failure of the program's start.
			return 128 + int(unix.SIGKILL), nil
		}
		return 0, err
	}
	unix.Close(pidfd)
	status := waitProgram(pid)
	// Every copy of errW is closed now: the child's (at its exec or exit) and those other
	// threads' children took at their clone (closed before they run anything of a plan's).
	var buf [16]byte
	if n, _ := readFull(errR, buf[:]); n == len(buf) {
		return 0, prog.failure(buf[:])
	}
	return status, nil
}

// pid1Exited reports whether the call's PID 1 has exited (its pidfd is readable).
func (c *zcall) pid1Exited() bool {
	fds := []unix.PollFd{{Fd: int32(c.pid1fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// programFor is the program's process (forked into the call's cgroup v2 group, if any): it joins
// the call's cgroup v1 groups, takes its resource limits, joins PID 1's process group, gets its
// standard streams and no other descriptor (but errW, close-on-exec), takes the plan's identity
// (dropIdentity), enters its directory, dies with the zygote's thread, gets the default signal
// handlers, installs the seccomp filter (after which it checks that its mode is 2; with seal, one
// that seals memfds, see sealMemfds) and execs the plan's program. Everything else (namespaces,
// no_new_privs, Landlock, the empty bounding set) it inherits from the confined thread.
func (c *zcall) programFor(p isolation.Plan, rlimits []rlimit, seal bool, errW int) (*rawProgram, error) {
	prog := &rawProgram{}
	zero := prog.ptr([]byte("0"))
	for _, fd := range c.tasks {
		prog.call("cgroup: join", unix.SYS_WRITE, uintptr(fd), zero, 1)
	}
	for _, l := range rlimits {
		prog.setrlimit(l.Resource, l.Cur, l.Max)
	}
	prog.call("process group", unix.SYS_SETPGID, 0, 1)
	for i, fd := range []int{c.stdin, c.stdout, c.stderr} {
		prog.call("standard streams", unix.SYS_DUP3, uintptr(fd), uintptr(i), 0)
	}
	prog.closeAllBut(errW)
	dropIdentity(prog, p, c.z.userNS)
	prog.call("chdir "+p.Dir, unix.SYS_CHDIR, prog.str(p.Dir))
	prog.call("parent death signal", unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL))
	// The zygote's own slack is larger (zygoteTimerSlack); the program starts as any does.
	prog.call("timer slack", unix.SYS_PRCTL, unix.PR_SET_TIMERSLACK, uintptr(spawn.DefaultTimerSlack.Nanoseconds()))
	prog.unblockSignals()
	if p.Seccomp {
		filter, err := seccomp.Program(seccomp.Options{NoExecMemfd: p.NoExecMemfd, SealMemfds: seal})
		if err != nil {
			return nil, err
		}
		fprog := &unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		prog.keep = append(prog.keep, filter, fprog)
		prog.call("seccomp", unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(fprog)))
		prog.call("verify: seccomp mode", unix.SYS_PRCTL, unix.PR_GET_SECCOMP, 0, 0, 0, 0).expect(2)
	}
	prog.call("execve", unix.SYS_EXECVE, prog.str(p.Path), prog.strv(p.Args), prog.strv(p.Env))
	return prog, nil
}

// dropIdentity appends to prog, the program's process, the ops that give it the plan's identity
// without capabilities, as dropPrivileges does the init's forking thread: the plan's umask, the
// locked securebits, no ambient capabilities, the plan's groups, gid and uid (not in a user
// namespace, userNS, whose only mapped id is the host user's: there it keeps uid and gid 0 of the
// namespace), empty effective, permitted and inheritable sets. The process shares the zygote's
// memory until it execs, and the uid change set the memory's dumpable flag to fs.suid_dumpable:
// it is set back to 0 at once, so that a process of the plan's uid cannot trace it. Then it checks
// the result with system calls, each of which must return what the plan says (verify ops):
// no_new_privs, the securebits, no capability, the uid and gid (real, effective, saved, file
// system) and the groups. The bounding set was emptied and checked when the thread was made ready
// (prepare); it cannot grow back.
func dropIdentity(prog *rawProgram, p isolation.Plan, userNS bool) {
	if p.Umask != 0 {
		prog.call("privileges: umask", unix.SYS_UMASK, uintptr(p.Umask&0o777))
	}
	prog.call("privileges: securebits", unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, lockedSecurebits, 0, 0, 0)
	prog.call("privileges: clear ambient capabilities", unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	uid, gid := p.UID, p.GID
	groups := slices.Sorted(slices.Values(p.Groups)) // as the kernel keeps them
	if userNS {
		uid, gid, groups = 0, 0, nil
	} else {
		prog.call(fmt.Sprintf("privileges: setgroups (%d groups)", len(groups)), unix.SYS_SETGROUPS, uintptr(len(groups)), prog.ids(groups...))
		prog.call(fmt.Sprintf("privileges: setresgid %d", gid), unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid))
		prog.call(fmt.Sprintf("privileges: setresuid %d", uid), unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid))
		prog.call("privileges: not dumpable", unix.SYS_PRCTL, unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	hdrAt := prog.ptr(unsafe.Slice((*byte)(unsafe.Pointer(&hdr)), unsafe.Sizeof(hdr)))
	noCaps := make([]byte, unsafe.Sizeof([2]unix.CapUserData{}))
	prog.call("privileges: capset", unix.SYS_CAPSET, hdrAt, prog.ptr(noCaps))

	prog.call("verify: no_new_privs", unix.SYS_PRCTL, unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0).expect(1)
	prog.call("verify: securebits", unix.SYS_PRCTL, unix.PR_GET_SECUREBITS, 0, 0, 0, 0).expect(lockedSecurebits)
	caps, capsAt := prog.buf(len(noCaps))
	prog.call("verify: capabilities", unix.SYS_CAPGET, hdrAt, capsAt).expectOut(caps, noCaps)
	for _, id := range []struct {
		what    string
		get, fs uintptr
		want    int
	}{{"uid", unix.SYS_GETRESUID, unix.SYS_SETFSUID, uid}, {"gid", unix.SYS_GETRESGID, unix.SYS_SETFSGID, gid}} {
		res, at := prog.buf(12)
		prog.call("verify: "+id.what, id.get, at, at+4, at+8).expectOut(res, idBytes(id.want, id.want, id.want))
		// -1 changes nothing and returns the current one.
		prog.call("verify: file system "+id.what, id.fs, ^uintptr(0)).expect(uintptr(id.want))
	}
	if !userNS {
		list, at := prog.buf(4 * len(groups))
		prog.call("verify: groups", unix.SYS_GETGROUPS, uintptr(len(groups)), at).expect(uintptr(len(groups))).
			expectOut(list, idBytes(groups...))
	}
}

// waitProgram waits for the program's process and returns its status: its exit code, or 128+n
// when signal n killed it.
func waitProgram(pid int) int {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, 0, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return exitFailure
		case ws.Signaled():
			return 128 + int(ws.Signal())
		default:
			return ws.ExitStatus()
		}
	}
}

// finish ends the call: PID 1 exits (the kernel kills and reaps what is left of the sandbox before
// its exit completes), and once the host closed the report pipe it is reaped, and every
// descriptor is closed.
func (c *zcall) finish() {
	closeFD(&c.ctlW)
	if c.hostDone != nil {
		<-c.hostDone
	}
	if c.pid1 >= 0 {
		for {
			if _, err := unix.Wait4(c.pid1, nil, 0, nil); !errors.Is(err, unix.EINTR) {
				break
			}
		}
		c.pid1Prog.release() // its stack, now that it is gone
	}
	for _, fd := range []*int{&c.pid1fd, &c.pid1Report, &c.pid1Children, &c.plan, &c.report, &c.stdout, &c.stderr, &c.stdin, &c.egress, &c.gate, &c.conn} {
		closeFD(fd)
	}
	closeAll(c.tasks)
	closeFD(&c.cgroupDir)
	// PID 1 is reaped: nothing of the call runs any more. (A request no thread took has no
	// namespace, nor a zygote.)
	if c.net != nil {
		c.z.nets.giveBack(c.net)
		c.net = nil
	}
}

// childRlimits are the resource limits the program's process sets on itself: the host's (as far
// as they do not exceed the zygote's hard limits, which the process cannot raise), then the plan's
// (see setRlimits).
func childRlimits(host []rlimit, l isolation.Limits) ([]rlimit, error) {
	out := make([]rlimit, 0, len(host)+4)
	for _, h := range host {
		var now unix.Rlimit
		if err := unix.Getrlimit(h.Resource, &now); err != nil {
			return nil, fmt.Errorf("getrlimit %d: %w", h.Resource, err)
		}
		r := rlimit{Resource: h.Resource, Max: min(h.Max, now.Max)}
		r.Cur = min(h.Cur, r.Max)
		out = append(out, r)
	}
	out = append(out, rlimit{Resource: unix.RLIMIT_CORE})
	if l.NoFile > 0 {
		out = append(out, rlimit{Resource: unix.RLIMIT_NOFILE, Cur: uint64(l.NoFile), Max: uint64(l.NoFile)})
	}
	if l.FileSize > 0 {
		out = append(out, rlimit{Resource: unix.RLIMIT_FSIZE, Cur: uint64(l.FileSize), Max: uint64(l.FileSize)})
	}
	if l.CPU > 0 {
		secs := uint64((l.CPU + time.Second - 1) / time.Second)
		out = append(out, rlimit{Resource: unix.RLIMIT_CPU, Cur: secs, Max: secs + 1})
	}
	return out, nil
}

// confineThread confines the calling thread, locked to its goroutine, as confine does the init's
// forking thread, minus what is per process or changes the credentials: no_new_privs and Landlock.
// The thread keeps the zygote's identity: the program's process drops to the plan's own before it
// execs (dropIdentity). A thread of the plan's uid could be signalled by any process of that uid,
// and a signal that stops or kills one thread stops or kills the whole zygote, which builds every
// user's sandboxes.
func confineThread(p isolation.Plan, paths *pathTable) (string, error) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "no_new_privs", err
	}
	if err := restrictLandlock(p, paths); err != nil {
		return "landlock", err
	}
	paths.close()
	return "", nil
}
