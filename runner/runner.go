// Package runner spawns one third-party CLI process safely: directly (never through a shell), with an
// environment built from nothing, stdin on /dev/null, in its own process group, under a wall-clock
// limit, with capped output capture, and without leaving processes, zombies or file descriptors
// behind. Command.Stdin, when set, is written to the process's stdin through a pipe instead;
// Command.Attach runs it on the caller's own files instead (an interactive login in a terminal).
// With Command.Sandbox set, the process is started through the kernel sandbox of package
// sandbox/nsinit (namespaces, masks, Landlock, seccomp); building that plan is package sandbox's job.
// A sandbox also ends on its own: with the host process (whatever kills it), and when Timeout plus
// Grace plus a margin has passed, even if the host process is alive but stuck.
package runner

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/clihost/clihost/internal/inflight"
	"github.com/clihost/clihost/internal/spawn"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/egress"
	"github.com/clihost/clihost/sandbox/nsinit"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

const (
	// DefaultTimeout is the wall-clock limit used when Command.Timeout is 0.
	DefaultTimeout = 30 * time.Second
	// DefaultGrace is the time between SIGTERM and SIGKILL used when Command.Grace is 0.
	DefaultGrace = 2 * time.Second
	// DefaultLimit is the number of bytes captured per stream when a Command's limit is 0.
	DefaultLimit = 10 << 20
)

// drainTimeout bounds how long Run keeps reading output after the process group is gone. Only a
// process that escaped the group (setsid) can still hold the write ends by then; once the bound
// passes, Run closes its read ends and returns.
const drainTimeout = time.Second

// sandboxMargin is how long after Run's own last resort (SIGKILL at Timeout plus Grace) a
// sandbox's init ends the sandbox by itself (nsinit Plan.Timeout): that guard is for a host that
// could not stop it, and must not pre-empt the host's orderly stop.
const sandboxMargin = 2 * time.Second

// ttySize is the window size of the pseudo-terminal given to a TTY command.
var ttySize = pty.Winsize{Rows: 24, Cols: 80}

// Command is one process to run. Nothing is inherited from the calling process: no env, no stdin, no fds.
type Command struct {
	Path        string        // absolute path of the binary (already resolved; never looked up in PATH here)
	Args        []string      // arguments after argv[0]; argv[0] is Path's base name
	Dir         string        // working directory (the workspace); must be absolute and exist
	Env         []string      // the complete environment, KEY=VALUE; nil means an empty environment
	Timeout     time.Duration // wall-clock limit; 0 means DefaultTimeout (none with Attach)
	Grace       time.Duration // time between SIGTERM and SIGKILL; 0 means DefaultGrace
	StdoutLimit int64         // capture cap; 0 means DefaultLimit; bytes beyond are read and discarded
	StderrLimit int64         // capture cap for stderr, as StdoutLimit
	// Stdin, when non-nil, is what the process reads on its standard input (through a pipe that is
	// closed once it is all written, or once the process has exited); nil means /dev/null. It
	// cannot be combined with TTY.
	Stdin []byte
	// TTY runs the command on a new pseudo-terminal (80x24): stdin, stdout and stderr are the pty
	// slave and its output (with the terminal's "\r\n" line endings) is read from the master into
	// Stdout; Stderr stays empty. Nothing is ever written to its input.
	TTY bool
	// Sandbox, when set, runs the command inside the kernel sandbox this plan describes (its path
	// lists, identity and switches); Run fills in its Path, Args, Dir and Env from the Command, and
	// its Timeout (Timeout plus Grace plus sandboxMargin, the init's own deadline; none for an
	// Attach command without Timeout). When
	// the sandbox cannot be built, Run returns an error wrapping nsinit.ErrUnavailable and the
	// program never ran. Nil runs the command unconfined.
	Sandbox *isolation.Plan
	// Egress, with Sandbox, gives the program the network this policy allows: the sandbox's init
	// creates the proxy, DNS and capture listeners inside its network namespace (nsinit
	// Plan.Egress), Run serves them with egress.Serve for as long as the process runs, and the
	// program's environment gets the proxy variables (egress.ProxyEnv). Nil: no network at all.
	Egress *egress.Policy
	// OnCleanupError, with Sandbox, is told when the call's control groups could not be removed
	// after Run returned (the sandbox's end is reported before its init has exited; its groups
	// are removed in the background). Otherwise that error is Result.CgroupErr.
	OnCleanupError func(error)
	// Pool, with Sandbox, starts the program in an init started ahead of the call (nsinit.Pool)
	// when one is ready, else as without it. Not used with TTY or Attach.
	Pool *nsinit.Pool
	// Gate, when set, is what must happen before the program starts (the git rule's snapshot of
	// the workspace). With Pool's zygote it runs while the sandbox is built; otherwise before the
	// sandbox gets its plan. An error from it refuses the call: Run returns it, wrapped, and the
	// program never ran. Run calls it once.
	Gate func() error
	// Attach, when set, runs the command on the caller's own files instead of captured output (it
	// cannot be combined with Stdin or TTY): Result.Stdout and Stderr stay empty, and the command
	// has no wall-clock limit unless Timeout is set (the person at the terminal ends it; ctx
	// cancels it).
	Attach *Attach
}

// Attach is the caller's stdio for a Command run in the caller's terminal. Files (a terminal) are
// the process's own; anything else is copied through pipes by os/exec, for at most drainTimeout
// once the process has exited.
type Attach struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Foreground, when set, is called with the command's process group once it has started and
	// its network is served; what it returns is called once the process has exited. A
	// terminal's owner passes what gives the terminal to that group and takes it back.
	Foreground func(pgid int) (restore func())
}

// EgressPolicy is the egress.Policy of these fields, for a caller that received them over the wire
// (clihostctl login, from control.EgressPolicy) and passes them on as Command.Egress.
func EgressPolicy(allow []string, ports []int, admitNets []netip.Prefix, maxConns int) *egress.Policy {
	return &egress.Policy{Allow: allow, Ports: ports, AdmitNets: admitNets, MaxConns: maxConns}
}

// Result is a finished process.
type Result struct {
	ExitCode        int    // the exit status; -1 when the process died of a signal (or its status was lost to another reaper)
	Signal          string // e.g. "SIGKILL" when it died of a signal, else ""
	Stdout, Stderr  []byte // the captured output, at most the limit of each stream
	StdoutTruncated bool   // Stdout had more bytes than its limit; the rest was discarded
	StderrTruncated bool   // Stderr had more bytes than its limit; the rest was discarded
	TimedOut        bool   // the timeout fired
	// Canceled reports that ctx was done (canceled, or its own deadline passed) before the process
	// finished, and the process was stopped because of it.
	Canceled bool
	Duration time.Duration // from start until the process was reaped
	// Exhausted names the resource limit of the sandbox (isolation.Plan.Limits) the process reached,
	// with its value ("memory limit 1 GiB reached (…)", "/tmp is full (256 MiB)"), or is "". It is
	// "" for a process that exited 0: a limit one of its children hit, it handled.
	Exhausted string
	// CgroupErr is set when the call's control groups could not be emptied and removed.
	CgroupErr error
}

// Run starts c and waits for it. The error is non-nil only when the process could not be started
// (binary missing, not executable, bad Dir, invalid Command, ctx already done): it is wrapped with
// context. Everything after start is in Result.
//
// The child is exec'd directly with argv[0] set to Path's base name. It runs in its own process group
// (its own session with the pty as controlling terminal when TTY), and receives SIGKILL if the host
// process dies. On timeout or when ctx is done, the group gets SIGTERM, then SIGKILL after Grace if the
// main process has not exited. Once the main process has exited, whatever is left of its group is
// SIGKILLed before the process is reaped, so the group id cannot have been reused by then. Output still
// held by a process that escaped the group is read for at most one more second. Run is safe for
// concurrent use.
//
// The child gets file descriptors 0, 1 and 2 only: before each start, every other descriptor of the
// host process is marked close-on-exec (see strayFDsCloseOnExec).
func Run(ctx context.Context, c Command) (Result, error) {
	c, err := c.normalize()
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("runner: %s not started: %w", c.Path, err)
	}
	if c.Gate != nil {
		c.Gate = sync.OnceValue(c.Gate)
		if c.Sandbox == nil {
			if err := c.Gate(); err != nil {
				return Result{}, fmt.Errorf("runner: %s not started: %w", c.Path, err)
			}
		}
	}
	argv := append([]string{filepath.Base(c.Path)}, c.Args...)
	cmd := &exec.Cmd{Path: c.Path, Args: argv, Dir: c.Dir, Env: c.Env}
	var sandboxed *nsinit.Cmd
	var pooled *nsinit.Stdio // the streams of an init taken from c.Pool, already started
	if c.Sandbox != nil {
		if sandboxed, pooled, err = sandbox(c, argv); err != nil {
			return Result{}, fmt.Errorf("runner: %s not started: %w: %w", c.Path, nsinit.ErrUnavailable, err)
		}
		defer func() { _ = sandboxed.Release() }() // on the paths that return early; a no-op after the one below
		cmd = sandboxed.Cmd
	}
	var stdout, stderr *capture
	var stdin *os.File
	var childEnds []*os.File
	if pooled != nil {
		// Started already, waiting for nothing but the plan it now has.
		stdout, stderr, stdin = &capture{r: pooled.Out, limit: c.StdoutLimit}, &capture{r: pooled.Err, limit: c.StderrLimit}, pooled.In
	} else if stdout, stderr, stdin, childEnds, err = attach(cmd, c); err != nil {
		if sandboxed != nil {
			sandboxed.CloseChildEnds()
			_ = sandboxed.Failure()
		}
		return Result{}, fmt.Errorf("runner: %s not started: %w", c.Path, err)
	}
	begin := time.Now()
	if pooled == nil {
		err = spawn.Start(cmd)
	}
	for _, f := range childEnds {
		f.Close()
	}
	if sandboxed != nil {
		sandboxed.CloseChildEnds()
		if err != nil {
			_ = sandboxed.Failure()
		}
	}
	if err != nil {
		for _, c := range []*capture{stdout, stderr} {
			if c != nil {
				c.r.Close()
			}
		}
		if stdin != nil {
			stdin.Close()
		}
		if sandboxed != nil {
			// What failed to start is the sandbox's init (its clone into new namespaces: a user
			// namespace limit, a kernel refusing them), not the CLI.
			return Result{}, fmt.Errorf("runner: cannot start %s in %s: %w: %w", c.Path, c.Dir, nsinit.ErrUnavailable, err)
		}
		return Result{}, fmt.Errorf("runner: cannot start %s in %s: %w", c.Path, c.Dir, err)
	}
	stopStdin := feed(stdin, c.Stdin)

	var readers sync.WaitGroup
	for _, c := range []*capture{stdout, stderr} {
		if c != nil {
			readers.Go(c.read)
		}
	}
	stopEgress, egressErr := serveEgress(sandboxed, c.Egress)
	stopIngress := func() {}
	if egressErr == nil && sandboxed != nil {
		if stopIngress, egressErr = sandboxed.ServeIngress(); egressErr != nil {
			egressErr = fmt.Errorf("ingress: %w", egressErr)
		}
	}
	restore := func() {}
	if egressErr != nil {
		signalGroup(cmd.Process.Pid, syscall.SIGKILL) // never run the program without the network it was given
	} else if c.Attach != nil && c.Attach.Foreground != nil {
		restore = c.Attach.Foreground(cmd.Process.Pid)
	}
	stopCPU := make(chan struct{})
	var cpuLimit <-chan struct{}
	if sandboxed != nil {
		cpuLimit = sandboxed.Group().WatchCPU(stopCPU)
	}
	res, cpuHit, finished := supervise(ctx, cmd, sandboxed, c, cpuLimit)
	restore()
	close(stopCPU)
	stopStdin()
	stopEgress()
	stopIngress()
	res.Duration = time.Since(begin)
	drain(&readers, stdout, stderr)

	if stdout != nil {
		res.Stdout, res.StdoutTruncated = stdout.data, stdout.truncated
	}
	if stderr != nil {
		res.Stderr, res.StderrTruncated = stderr.data, stderr.truncated
	}
	if sandboxed != nil {
		failure := sandboxed.Failure()
		res.Exhausted = sandboxed.Exhausted(cpuHit)
		switch {
		case finished:
			sandboxed.Finish(c.OnCleanupError) // the init's exit and the groups' removal, off the call's path
		case !sandboxed.Abandoned(): // else Abandon removes them once it can
			res.CgroupErr = sandboxed.Release()
		default:
			// The call's slot (inflight) stays taken until the sandbox let go of has ended.
			inflight.Hold(ctx, sandboxed.Gone())
		}
		switch {
		case failure != nil && nsinit.MayHaveRun(failure):
			return res, fmt.Errorf("runner: %s: %w", c.Path, failure)
		case failure != nil:
			return res, fmt.Errorf("runner: %s not started: %w", c.Path, failure)
		}
	}
	if egressErr != nil {
		return res, fmt.Errorf("runner: %s stopped: %w: network: %w", c.Path, nsinit.ErrUnavailable, egressErr)
	}
	return res, nil
}

// sandbox is the init that runs c (with c.Sandbox) as argv: one taken from c.Pool, already
// started, with its standard streams (when the pool has one ready and c needs no terminal), or
// one nsinit.Command prepares (pooled is then nil).
func sandbox(c Command, argv []string) (sandboxed *nsinit.Cmd, pooled *nsinit.Stdio, err error) {
	plan := *c.Sandbox
	plan.Path, plan.Args, plan.Dir, plan.Env = c.Path, argv, c.Dir, c.Env
	// The plan runs the resolved program (isolation.Plan.Path), under the name it was called by
	// (argv[0]): a symbolic link on the way to it (npm's node_modules/.bin/gemini, a link in /tmp)
	// may not exist in the sandbox's mount namespace (the init mounts a fresh /tmp). A link changed
	// since the policy was compiled resolves to a file its Exec does not list: refused.
	if r, err := filepath.EvalSymlinks(c.Path); err == nil {
		plan.Path = r
	}
	if c.Timeout > 0 {
		plan.Timeout = c.Timeout + c.Grace + sandboxMargin
	}
	if c.Egress != nil {
		nsinit.UseEgress(&plan)
	}
	if c.Pool != nil && !c.TTY && c.Attach == nil {
		if sandboxed, pooled, err = c.Pool.Take(plan, c.Stdin != nil, c.Gate); sandboxed != nil || err != nil {
			return sandboxed, pooled, err
		}
	}
	if c.Gate != nil {
		if err := c.Gate(); err != nil {
			return nil, nil, err
		}
	}
	sandboxed, err = nsinit.Command(plan)
	return sandboxed, nil, err
}

// Cleanup waits, at most timeout, until the sandboxes of the calls Run returned from have exited and
// their control groups are removed (that happens in the background: see Command.OnCleanupError).
// A process that ran sandboxed calls calls it before it exits, or their groups stay behind.
func Cleanup(timeout time.Duration) bool { return nsinit.WaitFinished(timeout) }

// serveEgress receives the egress listeners of a started sandbox whose plan has Egress (see
// nsinit.UseEgress) and serves them with pol until the returned stop is called (once the
// process is gone); stop waits until nothing is served any more. Without pol it does nothing.
func serveEgress(sandboxed *nsinit.Cmd, pol *egress.Policy) (stop func(), err error) {
	if sandboxed == nil || pol == nil {
		return func() {}, nil
	}
	ls, err := sandboxed.Listeners()
	if err != nil {
		return func() {}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = egress.Serve(ctx, ls, pol, nil) // a broken listener only takes the program's network away
	}()
	return func() { cancel(); <-done }, nil
}

// normalize checks c and fills in the defaults.
func (c Command) normalize() (Command, error) {
	switch {
	case !filepath.IsAbs(c.Path):
		return c, fmt.Errorf("runner: Path %q is not absolute (resolve it before calling Run)", c.Path)
	case !filepath.IsAbs(c.Dir):
		return c, fmt.Errorf("runner: %s: Dir %q is not absolute (set it to the workspace)", c.Path, c.Dir)
	case c.Timeout < 0 || c.Grace < 0 || c.StdoutLimit < 0 || c.StderrLimit < 0:
		return c, fmt.Errorf("runner: %s: negative Timeout, Grace or limit (use 0 for the default)", c.Path)
	case c.TTY && c.Stdin != nil:
		return c, fmt.Errorf("runner: %s: Stdin cannot be combined with TTY", c.Path)
	case c.Attach != nil && (c.TTY || c.Stdin != nil):
		return c, fmt.Errorf("runner: %s: Attach cannot be combined with Stdin or TTY", c.Path)
	}
	if c.Env == nil {
		c.Env = []string{} // a nil Env would make os/exec inherit the host's environment
	}
	if c.Timeout == 0 && c.Attach == nil {
		c.Timeout = DefaultTimeout
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.StdoutLimit == 0 {
		c.StdoutLimit = DefaultLimit
	}
	if c.StderrLimit == 0 {
		c.StderrLimit = DefaultLimit
	}
	return c, nil
}

// attach wires cmd's stdio and process attributes (added to those cmd already has, such as the
// sandbox's namespaces). It returns the captures to read (stderr is nil for a TTY, both are nil
// with c.Attach), the write end
// of the stdin pipe when c.Stdin is set (else nil) and the child's ends, which the caller closes
// once the child has started.
func attach(cmd *exec.Cmd, c Command) (stdout, stderr *capture, stdin *os.File, childEnds []*os.File, err error) {
	if a := c.Attach; a != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = a.Stdin, a.Stdout, a.Stderr
		cmd.WaitDelay = drainTimeout
		sysProcAttr(cmd).Setpgid = true
		return nil, nil, nil, nil, nil
	}
	if c.TTY {
		master, slave, err := openPTY()
		if err != nil {
			return nil, nil, nil, nil, err
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		attr := sysProcAttr(cmd)
		attr.Setpgid = false                                 // setpgid fails in a session leader
		attr.Setsid, attr.Setctty, attr.Ctty = true, true, 0 // Ctty: the child's fd 0, the slave
		return &capture{r: master, limit: c.StdoutLimit}, nil, nil, []*os.File{slave}, nil
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, nil, nil, fmt.Errorf("stderr pipe: %w", err)
	}
	childEnds = []*os.File{outW, errW}
	if c.Stdin != nil {
		inR, inW, err := os.Pipe()
		if err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return nil, nil, nil, nil, fmt.Errorf("stdin pipe: %w", err)
		}
		cmd.Stdin, stdin = inR, inW
		childEnds = append(childEnds, inR)
	}
	// Without c.Stdin, cmd.Stdin stays nil: os/exec opens /dev/null for it.
	cmd.Stdout, cmd.Stderr = outW, errW
	// A session of its own (and so a process group of its own): not the caller's controlling
	// terminal, which a sandboxed program could otherwise open as /dev/tty, write to, make its
	// group the foreground of and read (a clihostd started from a shell; the pool's inits and
	// zygote have sessions of their own for the same reason).
	attr := sysProcAttr(cmd)
	attr.Setpgid, attr.Setsid = false, true
	return &capture{r: outR, limit: c.StdoutLimit}, &capture{r: errR, limit: c.StderrLimit},
		stdin, childEnds, nil
}

// feed writes data to w (the write end of the child's stdin pipe) from a goroutine and closes it
// when done. The returned stop closes w, which ends a write still blocked on a child that stopped
// reading, and waits for the goroutine. With w nil it does nothing.
func feed(w *os.File, data []byte) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = w.Write(data) // EPIPE: the child did not read it all, which is its business
		w.Close()
	}()
	return func() { w.Close(); <-done }
}

// sysProcAttr returns cmd's process attributes, created when missing, with Pdeathsig set.
func sysProcAttr(cmd *exec.Cmd) *syscall.SysProcAttr {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return cmd.SysProcAttr
}

// openPTY opens a pseudo-terminal sized ttySize. pty.Open leaves the master in blocking mode (its
// ioctls go through File.Fd), where Close cannot interrupt a pending Read; the master is therefore
// re-opened as a non-blocking, pollable file so the bounded drain can stop reading it.
func openPTY() (master, slave *os.File, err error) {
	m, slave, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	defer m.Close()
	if err := pty.Setsize(slave, &ttySize); err != nil {
		slave.Close()
		return nil, nil, fmt.Errorf("size pty: %w", err)
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		slave.Close()
		return nil, nil, fmt.Errorf("dup pty master: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		slave.Close()
		return nil, nil, fmt.Errorf("pty master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), slave, nil
}

// supervise waits for cmd's process to exit, stopping its group on timeout or cancellation and
// killing it when cpuLimit fires (cpuHit is then true), kills what is left of the group, reaps
// the process and reports how it ended.
//
// With a sandbox whose init reports the end of the sandbox (sandboxed.Reported: the program
// exited and nothing else runs in it), that is the end: the status is the reported one and the
// init's own exit is waited for in the background (Finish).
func supervise(ctx context.Context, cmd *exec.Cmd, sandboxed *nsinit.Cmd, c Command, cpuLimit <-chan struct{}) (res Result, cpuHit bool, finished bool) {
	pid := cmd.Process.Pid
	var exited <-chan struct{}
	if sandboxed != nil {
		exited = sandboxed.Ended() // the end reported, or the init gone
	} else {
		ch := make(chan struct{})
		go func() {
			spawn.WaitExited(pid)
			close(ch)
		}()
		exited = ch
	}

	var timeout <-chan time.Time // none for an attached command without Timeout
	if c.Timeout > 0 {
		timer := time.NewTimer(c.Timeout)
		defer timer.Stop()
		timeout = timer.C
	}
	var stopped *bool
	select {
	case <-exited:
	case <-timeout:
		stopped = &res.TimedOut
	case <-ctx.Done():
		stopped = &res.Canceled
	case <-cpuLimit:
		cpuHit = true
		signalGroup(pid, syscall.SIGKILL)
		awaitKilled(exited, sandboxed)
	}
	if stopped != nil {
		select {
		case <-exited: // it finished on its own meanwhile
		default:
			*stopped = true
			signalGroup(pid, syscall.SIGTERM)
			grace := time.NewTimer(c.Grace)
			select {
			case <-exited:
			case <-grace.C:
				signalGroup(pid, syscall.SIGKILL)
				awaitKilled(exited, sandboxed)
			}
			grace.Stop()
		}
	}
	if sandboxed != nil && sandboxed.Abandoned() {
		return res, cpuHit, false // it may never exit: nothing more is waited for (see Abandon)
	}
	if sandboxed != nil && sandboxReported(sandboxed) {
		// The status the init would have exited with: 128+n for a program killed by signal n.
		res.ExitCode, _ = sandboxed.Reported()
		return res, cpuHit, true
	}
	// The main process is a zombie until Wait, which keeps its pid, and so the group id, from
	// being reused: this can only hit what is left of its own group. A sandbox from the zygote is
	// not this process's child: its PID 1 may have been reaped (the zygote died), so only it is
	// signalled, through its pidfd; its end ends everything in its sandbox.
	if sandboxed != nil && sandboxed.FromZygote() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
	} else {
		signalGroup(pid, syscall.SIGKILL)
	}

	_ = cmd.Wait() // the outcome is in ProcessState; the error only restates it
	res.ExitCode = -1
	if st := cmd.ProcessState; st != nil {
		ws := st.Sys().(syscall.WaitStatus)
		switch {
		case ws.Exited():
			res.ExitCode = ws.ExitStatus()
		case ws.Signaled():
			res.Signal = signalName(ws.Signal())
		}
	}
	return res, cpuHit, false
}

// killWait bounds the wait for a sandbox's end after SIGKILL: a process blocked in the kernel (a
// FUSE request its server read and never answers) does not die of it, and keeps its sandbox, and
// a caller waiting for it, for good.
const killWait = 10 * time.Second

// awaitKilled waits until exited is closed after the SIGKILL of the command's group; a sandbox
// that has not ended killWait later is abandoned (nsinit.Cmd.Abandon), which ends the wait.
func awaitKilled(exited <-chan struct{}, sandboxed *nsinit.Cmd) {
	if sandboxed == nil {
		<-exited
		return
	}
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		sandboxed.Abandon()
		<-exited
	}
}

// sandboxReported reports whether the sandbox's init reported its end (after Ended).
func sandboxReported(sandboxed *nsinit.Cmd) bool {
	_, ok := sandboxed.Reported()
	return ok
}

// signalGroup sends sig to every process in process group pgid. ESRCH (the group is empty) is the
// expected outcome once everything has exited, so errors are not reported.
func signalGroup(pgid int, sig syscall.Signal) {
	_ = unix.Kill(-pgid, sig)
}

// signalName names sig the way Result.Signal reports it, e.g. "SIGKILL".
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// drain waits for the readers to reach end of file, at most drainTimeout; then it closes the read
// ends, which makes any pending Read return, and waits for the readers to finish.
func drain(readers *sync.WaitGroup, captures ...*capture) {
	done := make(chan struct{})
	go func() {
		readers.Wait()
		close(done)
	}()
	timer := time.NewTimer(drainTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		for _, c := range captures {
			if c != nil {
				c.r.Close()
			}
		}
		<-done
	}
}

// capture reads one output stream to its end, keeping the first limit bytes.
type capture struct {
	r         *os.File
	limit     int64
	data      []byte
	truncated bool
}

// read reads c.r until end of file or an error (EIO once a pty's slave side is closed, or the file
// having been closed by drain), then closes it. Bytes beyond the limit are read and discarded so
// the writer never blocks on a full pipe.
func (c *capture) read() {
	defer c.r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.r.Read(buf)
		keep := min(int64(n), c.limit-int64(len(c.data)))
		c.data = append(c.data, buf[:keep]...)
		if keep < int64(n) {
			c.truncated = true
		}
		if err != nil {
			return
		}
	}
}
