package nsinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clihost/clihost/internal/filestamp"
	"github.com/clihost/clihost/internal/kernfile"
	"github.com/clihost/clihost/internal/spawn"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/cgroup"
	"golang.org/x/sys/unix"
)

// zygote is the host's side of a running zygote (see zygote_serve.go): a Pool hands it the calls
// it can serve, and each costs no Go program's start, no exec and no process of the host's own.
type zygote struct {
	cmd  *exec.Cmd
	conn *os.File        // the host's end of the SOCK_SEQPACKET pair
	exe  filestamp.Stamp // the executable it was started from

	userNS bool // it runs in a user namespace of its own (the host is not root)

	mu     sync.Mutex
	broken bool // a request could not be sent: the zygote is gone
	// abandoned counts the calls whose end the host stopped waiting for (endWithPID1): the thread
	// that served each may hang in the kernel for good.
	abandoned int
	ahead     aheadSandboxes // the sandboxes built ahead for plans that repeat
}

// zygoteMaxAbandoned is how many calls a zygote may leave to the host without their end before
// the pool replaces it (see zygote.abandon).
const zygoteMaxAbandoned = 4

// zygoteServes reports whether a zygote can build the sandbox of the prepared plan p: a plan without
// ingress (the dials into the sandbox need an init that stays in its network namespace for the
// call: the Pool's inits serve them). With egress, the zygote's thread makes the listeners in the
// call's network namespace and sends them as an init does. (A root host's zygote sandboxes always
// have vm.memfd_noexec=2: PID 1 sets it before the plan is known; every plan sandbox.Policy makes
// asks for it. In a user namespace the seccomp filter stands in for it, as in an init's.)
func zygoteServes(p isolation.Plan) bool {
	return len(p.Ingress) == 0
}

// startZygote starts the zygote from the sandbox executable (see UseHelper), as the spawner's
// child (it dies with the host: a parent-death signal, and the end of its socket), with no
// environment, and waits for its first message. A host that is not root starts it in a user
// namespace of its own, mapping only the host user and group to 0 (as initCommand does an init's):
// its threads may then make the other namespaces of each call, which a thread cannot do for a
// user namespace. It returns an error wrapping ErrUnavailable when the zygote says it cannot build
// sandboxes on this kernel.
func startZygote(root bool) (*zygote, error) {
	host, child, err := socketPair("zygote")
	if err != nil {
		return nil, fmt.Errorf("nsinit: %w", err)
	}
	defer child.Close()
	cmd := &exec.Cmd{
		Path:       executable(),
		Args:       zygoteArgs(),
		Env:        []string{},
		Dir:        "/",
		ExtraFiles: []*os.File{child},
		Stderr:     os.Stderr,
		// A session of its own, without a controlling terminal: every call's PID 1 and program
		// are in its session, and /dev/tty (granted to every sandbox for a program's own
		// terminal) would otherwise open the daemon's (a clihostd started from a shell): the
		// program could write to it, make its group the foreground one and read what is typed
		// there (TestZygoteHostsTerminalIsOutOfReach). Its process group is its pid, as before.
		SysProcAttr: &syscall.SysProcAttr{
			Pdeathsig: syscall.SIGKILL,
			Setsid:    true,
		},
	}
	if !root {
		mapHostUser(cmd.SysProcAttr)
	}
	if err := spawn.StartWithTimerSlack(cmd, zygoteTimerSlack); err != nil {
		host.Close()
		return nil, fmt.Errorf("nsinit: start the zygote: %w", err)
	}
	child.Close()
	z := &zygote{cmd: cmd, conn: host, userNS: !root}
	z.exe, _ = filestamp.Path(cmd.Path)
	hello, err := readHello(host)
	if err != nil || hello != zygoteReady {
		z.close()
		if reason, ok := strings.CutPrefix(hello, zygoteUnsupported); ok {
			return nil, fmt.Errorf("%w: %s", ErrUnavailable, reason)
		}
		return nil, fmt.Errorf("nsinit: the zygote did not start: %q (%v)", hello, err)
	}
	return z, nil
}

// helloTimeout bounds the wait for a new zygote's first message.
const helloTimeout = 10 * time.Second

// readHello reads the zygote's first message, waiting at most helloTimeout.
func readHello(conn *os.File) (string, error) {
	fds := []unix.PollFd{{Fd: int32(conn.Fd()), Events: unix.POLLIN}}
	for deadline := time.Now().Add(helloTimeout); ; {
		n, err := unix.Poll(fds, int(time.Until(deadline)/time.Millisecond)+1)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return "", err
		case n == 0:
			return "", errors.New("no answer within " + helloTimeout.String())
		}
		buf := make([]byte, 4096)
		n, err = conn.Read(buf)
		return string(buf[:max(n, 0)]), err
	}
}

// zygoteArgs is the zygote's command line: the marker, and the owner tag when there is one (see
// SetOwner and KillLeftovers).
// zygoteTimerSlack is the zygote's timer slack (its threads'; a call's program starts with
// spawn.DefaultTimerSlack, see programFor). While a call's thread waits in a system call, the Go
// runtime's monitor thread wakes every 20 µs, which Linux's default slack makes ~70 µs: ~25
// wake-ups a call, each taking a CPU from the calls. The monitor's deadlines are milliseconds.
const zygoteTimerSlack = 250 * time.Microsecond

func zygoteArgs() []string {
	args := initArgs()
	args[1] = zygoteMarker
	return args
}

// zygoteExitWait bounds close's wait for the zygote's exit once it said it is done: a thread of
// its that hangs in the kernel (a FUSE request its server read and never answers is waited for
// even through SIGKILL) keeps the process from ever being reaped; it is then reaped in the
// background if it ever can be.
const zygoteExitWait = 5 * time.Second

// close ends the zygote: it takes no more calls, and once each call it serves has ended or its
// host has let it go (see zserver.serve) it says it is done and exits. close returns then,
// without waiting for the process longer than zygoteExitWait.
func (z *zygote) close() {
	z.closeAhead()
	// A request sent before is read before the end (and served); one sent after fails (take).
	_ = unix.Shutdown(int(z.conn.Fd()), unix.SHUT_WR)
	buf := make([]byte, 64)
	for {
		n, err := z.conn.Read(buf)
		if err != nil || n == 0 || string(buf[:n]) == zygoteDone {
			break
		}
	}
	z.conn.Close()
	exited := make(chan struct{})
	go func() {
		_ = z.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(zygoteExitWait):
	}
}

// abandon records a call whose end the host stopped waiting for after its PID 1 exited: the
// zygote's thread that served it did not finish, and may never (see endWithPID1).
func (z *zygote) abandon() {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.abandoned++
}

// alive reports whether the zygote can still be given calls: it runs, it has not abandoned
// zygoteMaxAbandoned calls (threads hanging in the kernel are not piled up in one process: the
// pool starts another), and the sandbox executable is still the one it was started from
// (UseHelper, or the file replaced on disk).
func (z *zygote) alive() bool {
	z.mu.Lock()
	ok := !z.broken && z.abandoned < zygoteMaxAbandoned
	z.mu.Unlock()
	exe, _ := filestamp.Path(executable())
	return ok && exe == z.exe && !spawn.Exited(z.cmd.Process.Pid)
}

// take gives the zygote the call of the prepared plan p: it makes the call's pipes and control
// groups (in slot, a group made ahead, when not nil), sends them with the plan, and returns the
// Cmd of the call's PID 1 once the zygote made it, with the host's ends of the program's streams
// (stdin: whether the program gets input on a pipe, else /dev/null). The call goes to a sandbox
// the zygote built ahead for its plan when one is ready and still fits it (zygote_ahead.go),
// else to a thread that builds it. It returns a nil Cmd and no error when the zygote is gone (the
// call then starts another way), and an error wrapping ErrUnavailable when the zygote could not
// start the sandbox.
func (z *zygote) take(p isolation.Plan, stdin bool, slot *cgroup.Group, gate func() error) (*Cmd, *Stdio, error) {
	env, err := pooledEnvelope(p, stdin)
	if err != nil {
		return nil, nil, err
	}
	env.UserNS = z.userNS
	group, err := callGroup(p.Limits, slot)
	if err != nil {
		return nil, nil, err
	}
	key := string(aheadKey(env))
	cmd, stdio, err := z.takeAhead(key, p, env, stdin, group, gate)
	if errors.Is(err, errStale) {
		cmd, stdio, err = z.request(int(z.conn.Fd()), false, env, stdin, group, gate)
	}
	if cmd == nil {
		_ = group.Remove()
		return nil, nil, err
	}
	z.callStarted(key)
	cmd.afterEnd = func(reported bool) { z.callEnded(reported && zygoteBuildsAhead(p), key, env) }
	return cmd, stdio, nil
}

// callGroup returns the control group of a call with limits l: slot (made ahead, or nil) with l
// applied, or a new group; nil when l needs none.
func callGroup(l isolation.Limits, slot *cgroup.Group) (*cgroup.Group, error) {
	if !cgroupLimits(l) {
		if slot != nil {
			_ = slot.Remove()
		}
		return nil, nil
	}
	limits := groupLimits(l)
	if had, ok := slot.Applied(); ok && had != limits {
		_ = slot.Remove() // made with other limits, which Apply would not all reset
		slot = nil
	}
	if slot == nil {
		g, err := cgroup.Default().New(limits)
		if err != nil {
			return nil, fmt.Errorf("nsinit: %w", err)
		}
		return g, nil
	}
	if err := slot.Apply(limits); err != nil {
		_ = slot.Remove()
		return nil, fmt.Errorf("nsinit: %w", err)
	}
	return slot, nil
}

// request sends the call of env to the zygote on the socket conn (the zygote's, or with ahead the
// socket of a sandbox built ahead) with its pipes and group's files, and returns the Cmd of the
// call's PID 1 once the zygote made it. It returns a nil Cmd and no error when the zygote is gone,
// and errStale when the sandbox built ahead could not take the call (gone, or it no longer fits
// the plan): the call can be sent the usual way, nothing of it ran. On failure the caller removes
// group.
func (z *zygote) request(conn int, ahead bool, env envelope, stdin bool, group *cgroup.Group, gate func() error) (*Cmd, *Stdio, error) {
	p := env.Plan
	planR, err := writePlan(env)
	if err != nil {
		return nil, nil, fmt.Errorf("nsinit: %w", err)
	}
	sent := []*os.File{planR} // the zygote's ends, closed here once sent
	defer func() { closeFiles(sent) }()
	var host []*os.File // the host's ends, closed on failure
	fail := func(err error) (*Cmd, *Stdio, error) {
		closeFiles(host)
		return nil, nil, err
	}
	pipes := make([]*os.File, 4) // the host's ends of report, stdout, stderr, stdin
	for i, hostWrites := range []bool{false, false, false, true} {
		if i == 3 && !stdin {
			break
		}
		mine, theirs, err := sentPipe(hostWrites)
		if err != nil {
			return fail(fmt.Errorf("nsinit: %w", err))
		}
		pipes[i], sent, host = mine, append(sent, theirs), append(host, mine)
	}
	h := zygoteHeader{Stdin: stdin, Egress: p.Egress}
	var egress *egressConn
	if p.Egress {
		var child *os.File
		if egress, child, err = newEgressPair(); err != nil {
			return fail(fmt.Errorf("nsinit: %w", err))
		}
		host, sent = append(host, egress.f), append(sent, child)
	}
	var gateW *os.File
	if gate != nil {
		w, r, err := sentPipe(true)
		if err != nil {
			return fail(fmt.Errorf("nsinit: %w", err))
		}
		gateW, host, sent = w, append(host, w), append(sent, r)
		h.Gate = true
	}
	if group != nil {
		files, err := cgroupFiles(group)
		if err != nil {
			return fail(fmt.Errorf("nsinit: cgroup: %w", err))
		}
		sent = append(sent, files...)
		h.Tasks, h.Dir = len(group.TasksFiles()), group.V2Dir() != ""
	}
	body, err := json.Marshal(h)
	if err != nil {
		return fail(fmt.Errorf("nsinit: zygote request: %w", err))
	}
	fds := make([]int, len(sent))
	for i, f := range sent {
		fds[i] = int(f.Fd())
	}
	if err := unix.Sendmsg(conn, body, unix.UnixRights(fds...), nil, 0); err != nil {
		if ahead {
			return fail(errStale)
		}
		z.mu.Lock()
		z.broken = true
		z.mu.Unlock()
		return fail(nil)
	}
	closeFiles(sent)
	sent = nil
	report := pipes[0]
	pid, err := readPID(report)
	switch {
	case ahead && (errors.Is(err, errStale) || errors.Is(err, errNoWord)):
		// Nothing of the call ran: a sandbox built ahead says so before its PID 1's pid.
		return fail(errStale)
	case err != nil:
		return fail(fmt.Errorf("%w: %v", ErrUnavailable, err))
	}
	proc, err := os.FindProcess(pid) // not reaped by the zygote until the report pipe is closed
	if err != nil {
		return fail(fmt.Errorf("nsinit: PID 1: %w", err))
	}
	egress.bound(p)
	pid1Gone, err := endWithPID1(pid, report, egress)
	if err != nil {
		return fail(fmt.Errorf("nsinit: PID 1: %w", err))
	}
	if gateW != nil {
		// The zygote builds the sandbox meanwhile; its program waits for the gate. (A write that
		// fails finds the sandbox ended: its report says why.)
		err := gate()
		if err == nil {
			_, _ = gateW.Write([]byte{gateOpen})
		}
		gateW.Close()
		if err != nil {
			_ = proc.Release()
			return fail(err)
		}
	}
	cmd := &exec.Cmd{Path: executable(), Args: zygoteArgs(), Process: proc}
	return &Cmd{Cmd: cmd, report: report, egress: egress, group: group, limits: p.Limits, zyg: z, ahead: ahead, pid1Gone: pid1Gone},
		&Stdio{Out: pipes[1], Err: pipes[2], In: pipes[3]}, nil
}

// sentPipe makes a pipe whose one end this process keeps (mine: it writes to it when hostWrites,
// else reads from it) and whose other end it sends to another process (theirs). Only mine is
// non-blocking and held by the runtime's poller; theirs is a plain blocking descriptor, which
// os.Pipe would have registered with the poller, made non-blocking, and made blocking again when
// its descriptor was sent: five system calls more per pipe on a call's path.
func sentPipe(hostWrites bool) (mine, theirs *os.File, err error) {
	m, t, err := pipe()
	if err != nil {
		return nil, nil, err
	}
	if hostWrites {
		m, t = t, m
	}
	if err := unix.SetNonblock(m, true); err != nil {
		unix.Close(m)
		unix.Close(t)
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	return os.NewFile(uintptr(m), "|host"), os.NewFile(uintptr(t), "|sent"), nil
}

// FromZygote reports whether the zygote built c's sandbox: its Process (PID 1) is then not this
// process's child, Wait cannot reap it, and once the sandbox ended its pid may be another
// process's (signal it through Process, a pidfd, not by pid or process group).
func (c *Cmd) FromZygote() bool { return c.zyg != nil }

// cgroupFiles opens what the program's process of a call in group g joins it by: the v1 tasks
// files (it writes "0" to each) and the v2 directory (it is cloned into it).
func cgroupFiles(g *cgroup.Group) ([]*os.File, error) {
	var out []*os.File
	for _, path := range g.TasksFiles() {
		f, err := kernfile.Open(path, unix.O_WRONLY)
		if err != nil {
			closeFiles(out)
			return nil, err
		}
		out = append(out, f)
	}
	if d := g.V2Dir(); d != "" {
		f, err := kernfile.Open(d, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			closeFiles(out)
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// readPID reads the report pipe's first line, byte by byte so that nothing after it is consumed:
// "pid N", PID 1's pid. Any other line is the zygote's failure to start the sandbox, and the rest
// of the pipe (up to its end) is read into the error.
func readPID(report *os.File) (int, error) {
	var line []byte
	b := make([]byte, 1)
	for len(line) < 4096 {
		n, err := report.Read(b)
		if n == 0 || err != nil {
			break
		}
		if b[0] == '\n' {
			if v, ok := strings.CutPrefix(string(line), "pid "); ok {
				return strconv.Atoi(v)
			}
			if string(line) == staleLine {
				return 0, errStale
			}
			rest := make([]byte, 4096)
			n, _ := report.Read(rest)
			return 0, errors.New(strings.TrimSpace(string(line) + "; " + string(rest[:n])))
		}
		line = append(line, b[0])
	}
	if len(line) == 0 {
		return 0, errNoWord
	}
	return 0, errors.New(string(line))
}

// errNoWord is readPID's error when the report ended before its first line.
var errNoWord = errors.New("the zygote ended the call without a word")

// pid1Drain is how long the host still reads a zygote call's report once the call's PID 1 has
// exited: the zygote writes the report's last line right after that exit.
const pid1Drain = time.Second

// endWithPID1 returns a channel closed once PID 1 (pid, not yet reaped) has exited, and makes the
// reading of report, and the wait for egress's listeners (when not nil), end at most pid1Drain
// after that exit. The zygote's thread holds the report's write end and its end of the egress pair
// until it is done with them, and a thread that hangs in the kernel (as root, resolving a plan path
// on a file system whose server does not answer) is out of reach of every signal of the host's,
// which only PID 1 and the program get: the host must not wait for it once the sandbox is gone
// (the deadline or the host killed PID 1). The wait costs no thread: the pidfd waits in the
// runtime's poller.
func endWithPID1(pid int, report *os.File, egress *egressConn) (<-chan struct{}, error) {
	exited, err := exitWaiter(pid)
	if err != nil {
		return nil, err
	}
	gone := make(chan struct{})
	go func() {
		exited()
		close(gone)
		drained := time.Now().Add(pid1Drain)
		_ = report.SetReadDeadline(drained)
		egress.expire(drained)
	}()
	return gone, nil
}

// exitWaiter opens a pidfd of process pid (which need not be this process's child) now, while its
// pid is surely its own, and returns a function that waits, in the runtime's poller (no thread),
// until the process has exited, and then closes the pidfd.
func exitWaiter(pid int) (wait func(), err error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	pidfd := os.NewFile(uintptr(fd), "pidfd")
	conn, err := pidfd.SyscallConn()
	if err != nil {
		pidfd.Close()
		return nil, err
	}
	return func() {
		defer pidfd.Close()
		// A pidfd turns readable when its process exits; the callback says whether it has.
		_ = conn.Read(func(fd uintptr) bool {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			return err != nil || n > 0
		})
	}, nil
}
