// Package nsinit runs one program inside a kernel sandbox: new mount, PID, network, IPC, UTS and
// cgroup namespaces (plus a user namespace when the host is not root), a read-only view of the host
// with deny masks and writable binds, Landlock, an unprivileged uid, no capabilities, no_new_privs
// and a seccomp filter.
//
// The sandbox is built by an init: a clihost executable (the small clihost-sandbox helper when one is
// installed, see UseHelper, else the host's own) re-exec'd as "__clihost_init", PID 1 of the new
// PID namespace. It builds the mount namespace (private propagation, fresh /proc, minimal /dev with
// its own devpts, everything read-only and nosuid, tmpfs /tmp and /dev/shm, writable binds, deny
// masks and the pins that keep them in place), sets the hostname, brings lo up, with Plan.Egress
// mounts a generated /etc/resolv.conf and /etc/hosts and creates the egress listeners and sends
// them to the host (Cmd.Listeners, package sandbox/egress). Then, on one locked thread, it confines
// itself: Landlock, the plan's uid and gid, every capability dropped (bounding, ambient,
// inheritable, permitted, effective) with the securebits locked, no_new_privs, not dumpable, every
// fd above 2 close-on-exec, seccomp, and a check of the result in /proc/thread-self/status. Only
// then does it fork the program from that thread (which copies exactly that state) and exec it.
// Afterwards it only reaps children, forwards SIGTERM, SIGINT and SIGHUP to the program and exits
// with its status (128+n when killed by signal n), after noting on the report pipe the resource
// limits it saw the program reach (see Plan.Limits and Cmd.Exhausted); when it exits, the kernel
// kills whatever is left in the PID namespace. One re-exec, not two: a Go executable's start is most of a sandbox's cost.
//
// No sandbox outlives the process that started it or its deadline (Plan.Timeout): the init dies
// with its parent (a parent-death signal, set again after the uid change that clears it, and a
// watch on a descriptor only the host holds) and exits when the deadline passes; either way the
// kernel then kills every process in the sandbox. KillLeftovers finds the inits of a host that
// died anyway (see SetOwner).
//
// Every failure is fatal: the init exits with status 125 (127 when the final verification fails)
// after printing one line "clihost sandbox: <step>: <error>" to stderr and to the report pipe
// (Cmd.Failure). The program is never exec'd with a layer missing.
//
// Every binary that starts sandboxed processes must call Main first thing in main (and in TestMain),
// or import package nsinit/entry, which calls it before the rest of the program is initialised.
package nsinit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/clihost/clihost/internal/spawn"

	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/cgroup"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

const (
	initMarker = "__clihost_init"  // argv[1] of the init
	procName   = "clihost-sandbox" // argv[0] of the init, as seen in ps

	exitFailure = 125 // a sandbox step failed; the program did not run
	exitVerify  = 127 // the final check of the process state failed; the program did not run
)

// ErrUnavailable is wrapped by the errors of Check: this host cannot run the sandbox.
var ErrUnavailable = errors.New("sandbox unavailable")

// Cmd is a sandboxed program ready to start: an exec.Cmd running the init, plus the read end of the
// report pipe on which the init describes a failure to build the sandbox and, with
// Plan.Egress, the host's end of the socket pair the init sends its listeners on.
//
// The report pipe is also the sandbox's lifeline: the init ends the sandbox as soon as the read
// end is closed, which happens when the host process dies, when Failure is called, or when the Cmd
// is garbage-collected. Keep the Cmd reachable, and call Failure only after Wait.
type Cmd struct {
	*exec.Cmd
	report    *os.File
	childEnds []*os.File // what CloseChildEnds closes: ExtraFiles as Command built them
	egress    *egressConn
	ingress   *ingressConn
	// ingressPorts are the plan's Ingress ports, for ServeIngress.
	ingressPorts []int
	group        *cgroup.Group    // the call's control groups; nil without cgroup limits
	limits       isolation.Limits // the plan's limits, for Exhausted
	notes        []string         // what the init reported about limits after the program ran (see Failure)

	readOnce sync.Once
	ended    chan struct{} // closed when readReport is done
	lines    []string      // the report's lines, the end line excepted
	readErr  error
	status   int  // the end line's status
	reported bool // the end line was read

	zyg   *zygote // the zygote that built the sandbox (FromZygote), or nil
	ahead bool    // the zygote built the sandbox ahead of the call (zygote_ahead.go)
	// pid1Gone, for a zygote's call, is closed once its PID 1 (the zygote's child, not this
	// process's) has exited (endWithPID1).
	pid1Gone <-chan struct{}
	// afterEnd, when set, runs once Ended is closed, with whether the sandbox reported its end.
	afterEnd func(reported bool)
	// keep, when set (a zygote's call with a group, see Pool.keepGroup), keeps the call's group for
	// another call once Finish found it reusable, and reports whether it did.
	keep func(*cgroup.Group) bool
	// abandoned is set by Abandon: the host let go of a sandbox that did not end.
	abandoned atomic.Bool
	leftOnce  sync.Once
	left      chan struct{} // closed by Abandon (leftCh)
	goneOnce  sync.Once
	gone      chan struct{} // closed once the sandbox Abandon let go of has ended (goneCh)
}

// finishing counts the Finish goroutines still running (WaitFinished).
var finishing sync.WaitGroup

// WaitFinished waits, at most timeout, until every Finish has reaped its init and removed its
// groups, and reports whether they all did. A process calls it before it exits.
func WaitFinished(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() {
		finishing.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// endLine starts the last line the init writes to the report pipe: "end <status>", once the
// program exited and every other process of the sandbox is gone.
const endLine = "end "

// CloseChildEnds closes the host's copies of the descriptors handed to the init (the plan pipe, the
// report pipe's write end and, with Plan.Egress, the init's end of the listener socket pair). Call
// it once the command has started or failed to start.
func (c *Cmd) CloseChildEnds() {
	for _, f := range c.childEnds {
		if f != nil {
			f.Close()
		}
	}
}

// Failure reports, after Ended, why the sandbox could not run the program: an error wrapping
// ErrUnavailable that names the failed step ("landlock: ...", "mount: bind /x: ..."), or nil when
// the program was exec'd (what it did afterwards is its exit status, not a sandbox failure). A
// program cannot fake a failure: the report pipe is close-on-exec, and after the exec the init
// writes only limit notes and the end line to it. Failure closes the read end, and the host's
// end of the listener socket pair if Listeners was not called. It also collects the limits the
// init saw the program reach (see Exhausted).
func (c *Cmd) Failure() error {
	<-c.Ended()
	defer c.report.Close()
	c.egress.close()
	c.ingress.close()
	if c.abandoned.Load() || c.zyg != nil && errors.Is(c.readErr, os.ErrDeadlineExceeded) {
		// Abandon let go of it, or its PID 1 ended and the zygote's thread did not end the report
		// (endWithPID1).
		return lostError{fmt.Errorf("%w: the sandbox did not end when it was killed: a process of it, or the thread building it, is blocked in the kernel (a file system that does not answer?); it is left to end on its own", ErrUnavailable)}
	}
	if c.readErr != nil {
		return lostError{fmt.Errorf("%w: read the sandbox report: %v", ErrUnavailable, c.readErr)}
	}
	var failure []string
	for _, line := range c.lines {
		if note, ok := strings.CutPrefix(strings.TrimSpace(line), limitNote); ok {
			c.notes = append(c.notes, note)
		} else {
			failure = append(failure, line)
		}
	}
	if msg := strings.TrimSpace(strings.Join(failure, "")); msg != "" {
		return fmt.Errorf("%w: %s", ErrUnavailable, msg)
	}
	if c.zyg != nil && !c.reported {
		// An init's exit status says how it ended; the zygote's end line is all there is.
		return lostError{fmt.Errorf("%w: the sandbox ended without its end: the zygote died", ErrUnavailable)}
	}
	return nil
}

// lostError is a Failure after which the program may have run: the host lost the sandbox (left
// blocked in the kernel, its zygote died, its report could not be read), rather than a step before
// the program's exec failing.
type lostError struct{ error }

func (e lostError) Unwrap() error { return e.error }

// MayHaveRun reports whether err, a Failure, leaves open that the program ran (part of the way):
// the host lost its sandbox. Any other Failure is a step before the program's exec.
func MayHaveRun(err error) bool {
	var lost lostError
	return errors.As(err, &lost)
}

// Ended returns a channel closed once the sandbox has ended for the host: the init reported that
// the program exited and that nothing else runs in the sandbox any more (see Reported), or the
// report pipe reached its end and the init has exited (it failed, or was killed; it is not reaped:
// Wait does that). Call it after Start; the first call starts reading the report pipe.
func (c *Cmd) Ended() <-chan struct{} {
	c.readOnce.Do(func() {
		c.ended = make(chan struct{})
		go c.readReport()
	})
	return c.ended
}

// readReport reads the report pipe's lines (at most 4 KiB) until the end line or the end of the
// pipe, then closes c.ended.
func (c *Cmd) readReport() {
	defer func() {
		close(c.ended)
		if c.afterEnd != nil {
			c.afterEnd(c.reported)
		}
	}()
	r := bufio.NewReader(io.LimitReader(lateReader{c.report}, 4096))
	for {
		line, err := r.ReadString('\n')
		if v, ok := strings.CutPrefix(line, endLine); ok && err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				c.status, c.reported = n, true
				return
			}
		}
		if line != "" {
			c.lines = append(c.lines, line)
		}
		switch {
		case errors.Is(err, io.EOF) && c.pid1Gone != nil:
			// The zygote's thread ended the report without its end line (the zygote died): the
			// sandbox is over once PID 1 has exited (it dies with the thread that made it, and its
			// exit waits for the rest of its PID namespace), unless Abandon lets go of it.
			select {
			case <-c.pid1Gone:
			case <-c.leftCh():
			}
			return
		case errors.Is(err, io.EOF):
			if c.Process != nil {
				// The pipe's end: the init is exiting, if it has not yet (unless Abandon lets go of
				// it: an init that exits waits for the processes of its PID namespace).
				exited := make(chan struct{})
				go func() {
					spawn.WaitExited(c.Process.Pid)
					close(exited)
				}()
				select {
				case <-exited:
				case <-c.leftCh():
				}
			}
			return
		case err != nil:
			c.readErr = err
			if errors.Is(err, os.ErrDeadlineExceeded) && c.zyg != nil && !c.abandoned.Load() {
				c.zyg.abandon() // PID 1 exited and its thread never ended the report (endWithPID1)
			}
			return
		}
	}
}

// lateReader reads f, whose read deadline (a zygote's call's report, see endWithPID1) may have
// passed before the host began to read: os.File's read then fails without looking, so what is in
// the pipe already (the end line, written when the sandbox ended) is read without waiting instead,
// and only an empty pipe gives the deadline's error.
type lateReader struct{ f *os.File }

func (r lateReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		return n, err
	}
	rc, cerr := r.f.SyscallConn()
	if cerr != nil {
		return 0, err
	}
	var rerr error
	if cerr := rc.Control(func(fd uintptr) { n, rerr = unix.Read(int(fd), b) }); cerr != nil || rerr != nil {
		return 0, err // EAGAIN: nothing is there
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Abandon lets go of a sandbox that does not end although it was killed (a process of it blocked
// in the kernel, on a file system that does not answer: SIGKILL does not end such a wait): the
// host's waits for its listeners and its report end at once (Ended closes; Failure says so), and
// its exit, and the removal of its control groups, are waited for in the background, for as long
// as it takes. Call it instead of Wait, Release and Finish.
func (c *Cmd) Abandon() {
	if !c.abandoned.CompareAndSwap(false, true) {
		return
	}
	close(c.leftCh())
	now := time.Now()
	c.egress.expire(now)
	_ = c.report.SetReadDeadline(now)
	group := c.group
	c.group = nil
	wait := func() { _ = c.Wait() }
	if c.zyg != nil {
		// PID 1 is the zygote's child, not this process's: Wait fails. Its pidfd is opened now,
		// while the host still holds the report (the zygote does not reap PID 1 before it lets go).
		var err error
		if wait, err = exitWaiter(c.Process.Pid); err != nil {
			wait = func() {}
		}
	}
	gone := c.goneCh()
	go func() {
		wait()
		_ = c.Process.Release()
		_ = group.Remove()
		close(gone)
	}()
}

// Gone returns, after Abandon, a channel closed once the sandbox it let go of has ended (its
// init, or its PID 1, has exited) and its control groups are removed; nil when Abandon was not
// called. (Whoever bounds the sandboxes a caller may hold counts an abandoned one until then: it
// still holds a thread, a PID namespace and a control group.)
func (c *Cmd) Gone() <-chan struct{} {
	if !c.abandoned.Load() {
		return nil
	}
	return c.goneCh()
}

// goneCh is the channel Gone returns.
func (c *Cmd) goneCh() chan struct{} {
	c.goneOnce.Do(func() { c.gone = make(chan struct{}) })
	return c.gone
}

// leftCh is the channel Abandon closes.
func (c *Cmd) leftCh() chan struct{} {
	c.leftOnce.Do(func() { c.left = make(chan struct{}) })
	return c.left
}

// Abandoned reports whether Abandon let go of the sandbox.
func (c *Cmd) Abandoned() bool { return c.abandoned.Load() }

// Reported returns, after Ended, the program's exit status as the init reported it (its exit
// code, or 128+n when signal n killed it), and whether it did: then every process of the sandbox
// is gone but the init, which is exiting, and Wait may be left to Finish.
func (c *Cmd) Reported() (status int, ok bool) { return c.status, c.reported }

// Finish waits for the init to exit and removes the call's control groups, in the background,
// passing an error to onErr (when set): for a Cmd whose end was Reported, so that the namespaces'
// teardown does not delay the call's result. Release and Wait must not be called after it.
func (c *Cmd) Finish(onErr func(error)) {
	group := c.group
	c.group = nil
	finishing.Add(1)
	go func() {
		defer finishing.Done()
		_ = c.Wait()
		// A sandbox from the zygote is not this process's child: Wait fails and keeps the pidfd
		// os.FindProcess opened.
		_ = c.Process.Release()
		// A group whose call reported its end holds no process (the end waits for every one), and
		// may serve the caller's next call when nothing of this one is left in it (cgroup.Reuse).
		if group != nil && c.keep != nil && c.reported && group.Reuse() == nil && c.keep(group) {
			return
		}
		if err := group.Remove(); err != nil && onErr != nil {
			onErr(err)
		}
	}()
}

// Command builds the Cmd that runs p sandboxed: the sandbox helper or the current executable
// re-exec'd as the init, in new mount, PID, network, IPC, UTS and cgroup namespaces, plus a user
// namespace mapping only the host user to uid 0 when the host is not root. The child gets SIGKILL
// when its parent thread dies (Pdeathsig) and its own process group (Setpgid), an empty environment
// and / as working directory. The plan is checked and resolved (see Plan) and written to a pipe whose
// read end is Cmd.ExtraFiles[0].
//
// With Plan.Egress, ExtraFiles[2] is the init's end of a socket pair whose other end stays in the
// Cmd: after Start, Listeners returns the sockets the init created (and the caller serves them,
// see package sandbox/egress).
//
// With cgroup limits in Plan.Limits on a host that offers cgroups, Command creates the call's
// control groups (package sandbox/cgroup): on cgroup v2 the init is cloned into its group
// (CLONE_INTO_CGROUP); on v1 the descriptors of the groups' tasks files follow the others in
// ExtraFiles and the init's forking thread joins them before it confines itself. Release removes
// them once the command has been waited for.
//
// The caller sets Stdin, Stdout and Stderr, starts the command, calls CloseChildEnds (and, with
// Egress, Listeners), waits for it, and asks Failure whether the sandbox was built (a failed start
// still needs CloseChildEnds and, to release the report pipe and the socket pair, Failure). For a
// controlling terminal, replace Setpgid with Setsid and Setctty (setpgid fails in a session
// leader). The init exits with the program's status, 125 when the sandbox could
// not be built, 127 when the final check failed.
func Command(p isolation.Plan) (*Cmd, error) {
	root := os.Geteuid() == 0
	prepared, err := prepare(p, root)
	if err != nil {
		return nil, err
	}
	deadline, err := deadlineFor(prepared.Timeout)
	if err != nil {
		return nil, fmt.Errorf("nsinit: deadline: %w", err)
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("nsinit: report pipe: %w", err)
	}
	childEnds := []*os.File{nil, reportW} // [0]: the plan pipe, written last
	var host *egressConn
	if prepared.Egress {
		var child *os.File
		host, child, err = newEgressPair()
		if err != nil {
			closeFiles(append(childEnds, reportR))
			return nil, fmt.Errorf("nsinit: %w", err)
		}
		host.bound(prepared)
		childEnds = append(childEnds, child)
	}
	var ingress *ingressConn
	if len(prepared.Ingress) > 0 {
		var child *os.File
		ingress, child, err = newIngressPair()
		if err != nil {
			closeFiles(append(childEnds, reportR))
			host.close()
			return nil, fmt.Errorf("nsinit: %w", err)
		}
		for len(childEnds) < ingressFD-3 {
			childEnds = append(childEnds, nil) // no egress pair: its descriptor stays closed
		}
		childEnds = append(childEnds, child)
	}
	lim, err := newCallLimits(prepared.Limits)
	if err != nil {
		closeFiles(append(childEnds, reportR))
		host.close()
		ingress.close()
		return nil, fmt.Errorf("nsinit: %w", err)
	}
	env := envelope{Protocol: planProtocol, Plan: prepared, UserNS: !root, Deadline: deadline}
	for _, f := range lim.tasks {
		env.CgroupFDs = append(env.CgroupFDs, 3+len(childEnds))
		childEnds = append(childEnds, f)
	}
	if childEnds[0], err = writePlan(env); err != nil {
		closeFiles(append(childEnds, reportR))
		host.close()
		ingress.close()
		lim.close()
		return nil, fmt.Errorf("nsinit: %w", err)
	}
	extra := slices.Clone(childEnds)
	if lim.dir != nil {
		childEnds = append(childEnds, lim.dir) // closed with the others; not handed to the init
	}
	cmd := initCommand(root)
	cmd.ExtraFiles = extra
	if lim.dir != nil {
		// CLONE_INTO_CGROUP: the init starts in its call's cgroup v2 group.
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(lim.dir.Fd())
	}
	return &Cmd{Cmd: cmd, report: reportR, childEnds: childEnds, egress: host, ingress: ingress, ingressPorts: prepared.Ingress,
		group: lim.group, limits: prepared.Limits}, nil
}

// initEnv is the init's whole environment (the program's comes from its plan, never from the
// init's). One P: the init runs one step at a time, and a second P had the Go runtime start and
// wake threads for its background goroutines, about 0.5 ms of CPU per init on two cores
// (BenchmarkInitStart); set, it also spares the runtime reading the cgroup CPU limit at start.
var initEnv = []string{"GOMAXPROCS=1"}

// initCommand is the command of one init: the helper (or this executable) re-exec'd with the init
// marker, initEnv as its environment, / as working directory, in new mount, PID, network, IPC, UTS and
// cgroup namespaces (plus a user namespace mapping only the host user to uid 0 when the host is
// not root), in its own process group, killed when the thread that forked it dies.
func initCommand(root bool) *exec.Cmd {
	cmd := &exec.Cmd{
		Path: executable(),
		Args: initArgs(),
		Env:  initEnv,
		Dir:  "/",
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC |
				unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP,
			Pdeathsig: syscall.SIGKILL,
			Setpgid:   true,
		},
	}
	if !root {
		mapHostUser(cmd.SysProcAttr)
	}
	return cmd
}

// mapHostUser makes attr's process start in a new user namespace that maps only the host's
// effective user and group, to 0, with setgroups denied (what an unprivileged process may map).
func mapHostUser(attr *syscall.SysProcAttr) {
	attr.Cloneflags |= unix.CLONE_NEWUSER
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	attr.GidMappingsEnableSetgroups = false
}

// closeFiles closes every non-nil file of files.
func closeFiles(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// The main goroutine keeps the process's main thread for the process's life: locked here, in the
// package's initialisation, which the runtime runs on that thread. Without this, once main (or
// TestMain) had started, the scheduler could move the main goroutine to another thread and run any
// goroutine on the main thread; one that locks its thread, changes what is per thread (a zygote
// thread's namespaces, a credential check's identity) and ends locked cannot take the main thread
// down with it: the runtime keeps the main thread, wedged, in what it was left in. The thread group
// leader is what /proc/self shows, so the mount table the Pool and the zygote compare to tell a
// stale copy (mountTable) would then be that wedged thread's, frozen, and a sandbox built on a copy
// older than the host's last mount or unmount would be used. A zygote checks that it runs on the
// main thread (runZygote).
func init() { runtime.LockOSThread() }

// Main must be called first thing in main (and in TestMain) of every binary that may start
// sandboxed processes, or earlier: a program importing package nsinit/entry calls it from that
// package's initialisation, before its other large packages are initialised. When this process is a sandbox init (argv[1] is the marker Command uses),
// Main never returns: it runs the init and exits with the program's status. Otherwise it returns
// immediately.
func Main() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case initMarker:
		os.Exit(runInit())
	case zygoteMarker:
		os.Exit(runZygote())
	}
}

// reportFD is the descriptor of the report pipe's write end in the init.
const reportFD = 4

// fail prints the one-line failure report of a sandbox step to stderr and to the report pipe, and
// returns code, for os.Exit.
func fail(code int, step string, err error) int {
	line := fmt.Sprintf("%s: %v", step, err)
	fmt.Fprintf(os.Stderr, "clihost sandbox: %s\n", line)
	_, _ = unix.Write(reportFD, []byte(line)) // EBADF once the init closed its copy: nothing to report to
	return code
}

// Support is what Probe found on this host.
type Support struct {
	LandlockABI int  // the Landlock ABI version the sandbox will enforce (go-landlock's maximum at most)
	UserNS      bool // the sandbox uses a user namespace (the host is not root)
	Seccomp     bool // the kernel offers seccomp filters with SECCOMP_RET_KILL_PROCESS
}

// Probe reports what this host supports, or why the sandbox is unavailable (the error wraps
// ErrUnavailable and names the missing piece). It checks the kernel interfaces only; it starts no
// process.
func Probe() (Support, error) {
	var s Support
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		return s, fmt.Errorf("%w: %s/%s is not supported (linux/amd64 or linux/arm64 only)", ErrUnavailable, runtime.GOOS, runtime.GOARCH)
	}
	v, err := landlockABI()
	if err != nil {
		return s, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	s.LandlockABI = v
	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		if _, err := os.Stat("/proc/self/ns/" + ns); err != nil {
			return s, fmt.Errorf("%w: %s namespaces: %v", ErrUnavailable, ns, err)
		}
	}
	if os.Geteuid() != 0 {
		s.UserNS = true
		n, err := readInt("/proc/sys/user/max_user_namespaces")
		if err != nil {
			return s, fmt.Errorf("%w: user namespaces: %v", ErrUnavailable, err)
		}
		if n == 0 {
			return s, fmt.Errorf("%w: user namespaces are disabled (user.max_user_namespaces=0) and the host is not root", ErrUnavailable)
		}
		// Debian's switch, when the kernel has it.
		if n, err := readInt("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && n == 0 {
			return s, fmt.Errorf("%w: unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0) and the host is not root", ErrUnavailable)
		}
	}
	actions, err := os.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
	if err != nil {
		return s, fmt.Errorf("%w: seccomp: %v", ErrUnavailable, err)
	}
	if !strings.Contains(" "+strings.TrimSpace(string(actions))+" ", " kill_process ") {
		return s, fmt.Errorf("%w: seccomp: no kill_process action", ErrUnavailable)
	}
	s.Seccomp = true
	return s, nil
}

// Check reports whether this host can run the sandbox: nil, or an error wrapping ErrUnavailable that
// names the missing piece (see Probe).
func Check() error {
	_, err := Probe()
	return err
}

// minLandlockABI is the oldest Landlock ABI the sandbox accepts (v3: truncation is controlled).
const minLandlockABI = 3

// landlockABI returns the Landlock ABI version to enforce: the kernel's, after the same errata
// downgrade go-landlock applies, capped at go-landlock's newest; an error below minLandlockABI.
func landlockABI() (int, error) {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0, fmt.Errorf("landlock: not supported by the kernel or not enabled: %w", err)
	}
	if v >= 6 {
		// go-landlock treats a kernel whose signal scoping is not fixed (erratum 2) as v5.
		if errata, err := llsys.LandlockGetErrata(); err != nil || errata&2 == 0 {
			v = 5
		}
	}
	if v < minLandlockABI {
		return 0, fmt.Errorf("landlock: ABI v%d is below the required v%d", v, minLandlockABI)
	}
	return min(v, len(landlockPresets)+minLandlockABI-1), nil
}

// readInt reads a file holding one decimal integer.
func readInt(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return n, nil
}
