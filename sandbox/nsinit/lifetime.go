package nsinit

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A sandbox never outlives the process that started it, nor its deadline. Three guards hold it,
// each enough to end the whole sandbox, since the kernel kills every process of a PID namespace
// when its PID 1, the init, exits:
//
//   - The parent-death signal. Command starts the init with Pdeathsig SIGKILL, but the kernel clears
//     it on any change of the effective or filesystem uid or gid, which confine makes when it
//     switches to the plan's identity. armParentDeath sets it again right after, then checks that
//     the host is still there: a host that died in between sent no signal.
//   - The lifeline: the init keeps a copy of the report pipe's write end (close-on-exec, so the
//     program never has it), and the host keeps the read end until after Wait (Failure closes it).
//     The kernel closes the host's descriptors when it dies, however it dies, and the write end
//     then polls POLLERR. getppid cannot tell (it is 0 in a new PID namespace), so this is the
//     check armParentDeath makes, and watchHost waits for it for as long as the init runs: it
//     also covers the moment between a thread of the host exiting (the parent-death signal is
//     tied to the thread that forked the init) and the host's descriptors closing.
//   - The deadline (Plan.Timeout): the init exits when it has passed, whatever the host does.

// exitKilled is the init's status when it ends the sandbox itself (the host is gone, or the
// deadline passed): 128+SIGKILL, as if the program had been killed.
const exitKilled = 128 + int(unix.SIGKILL)

// lifeline returns a close-on-exec copy of the report pipe's write end, which the init keeps after
// it closes reportFD (see watchHost).
func lifeline() (int, error) {
	return unix.FcntlInt(reportFD, unix.F_DUPFD_CLOEXEC, 3)
}

// armParentDeath sets the calling thread's parent-death signal to SIGKILL (a uid or gid change
// clears it) and then reports an error when the host is already gone, in which case no signal will
// come. The thread must stay alive as long as the init: the signal is recorded per thread.
func armParentDeath(lifelineFD int) error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("set: %w", err)
	}
	gone, err := hostGone(lifelineFD, 0)
	if err != nil {
		return fmt.Errorf("check the host: %w", err)
	}
	if gone {
		return errors.New("the host is gone")
	}
	return nil
}

// parentDeathSignal returns the calling thread's parent-death signal (0 for none).
func parentDeathSignal() (int, error) {
	var sig int32
	if err := unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0, 0, 0); err != nil {
		return 0, err
	}
	return int(sig), nil
}

// hostGone polls the lifeline for at most timeout milliseconds (-1: until it happens) and reports
// whether the host's end is closed.
func hostGone(lifelineFD, timeout int) (bool, error) {
	for {
		fds := []unix.PollFd{{Fd: int32(lifelineFD)}} // no events asked: POLLERR and POLLHUP come anyway
		n, err := unix.Poll(fds, timeout)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return false, err
		}
		return n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0, nil
	}
}

// watchHost waits until the host's end of the lifeline closes and then exits the init, which makes
// the kernel kill everything in the sandbox. It never returns: a lifeline that cannot be polled
// ends the init too (a sandbox whose host cannot be watched does not run on).
func watchHost(lifelineFD int) {
	_, _ = hostGone(lifelineFD, -1)
	os.Exit(exitKilled)
}

// bootTime is CLOCK_BOOTTIME in nanoseconds, the clock deadlines are measured on: the same in the
// host and in the sandbox (which has no time namespace), and not stopped by a suspend.
func bootTime() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, fmt.Errorf("clock_gettime: %w", err)
	}
	return ts.Nano(), nil
}

// deadlineFor returns the CLOCK_BOOTTIME instant timeout from now, 0 when timeout is not positive.
func deadlineFor(timeout time.Duration) (int64, error) {
	if timeout <= 0 {
		return 0, nil
	}
	now, err := bootTime()
	if err != nil {
		return 0, err
	}
	return now + int64(timeout), nil
}

// enforceDeadline exits the init once the CLOCK_BOOTTIME instant deadline has passed (at once when
// it has already), which makes the kernel kill everything in the sandbox. Zero means no deadline.
func enforceDeadline(deadline int64) error {
	if deadline == 0 {
		return nil
	}
	now, err := bootTime()
	if err != nil {
		return err
	}
	time.AfterFunc(time.Duration(deadline-now), func() { os.Exit(exitKilled) })
	return nil
}

// owner is what SetOwner set: the third argument of every init Command starts.
var owner struct {
	sync.Mutex
	tag string
}

// validOwnerTag reports whether tag is what an owner tag may be (it is an argument of every init,
// for KillLeftovers to match): 1 to 64 of [a-z0-9._-], the first a letter or digit. A plain loop,
// not a regexp: the package's initialisation runs in every sandbox init, and compiling the
// pattern's bounded repetition there cost 0.2–0.4 ms and 700 allocations per init.
func validOwnerTag(tag string) bool {
	if len(tag) == 0 || len(tag) > 64 {
		return false
	}
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// SetOwner tags every init Command starts from now on with tag, as the third argument of its
// command line ("clihost-sandbox __clihost_init TAG", as /proc/PID/cmdline shows it), so that
// KillLeftovers(tag), run by a later process, finds the sandboxes this one leaves if it dies before
// they end. A tag is 1 to 64 lower-case letters, digits, dots, dashes and underscores; a daemon
// uses one that no other daemon on the host uses, such as a digest of its state directory.
func SetOwner(tag string) error {
	if !validOwnerTag(tag) {
		return fmt.Errorf("nsinit: owner tag %q: want 1 to 64 of [a-z0-9._-], starting with a letter or digit", tag)
	}
	owner.Lock()
	defer owner.Unlock()
	owner.tag = tag
	return nil
}

// initArgs returns the init's command line: the marker, and the owner tag when there is one.
func initArgs() []string {
	owner.Lock()
	defer owner.Unlock()
	if owner.tag == "" {
		return []string{procName, initMarker}
	}
	return []string{procName, initMarker, owner.tag}
}

// KillLeftovers SIGKILLs every sandbox init on this host whose command line carries the owner tag
// tag (see SetOwner), which ends each of those sandboxes whole, and returns how many it killed.
// Call it before starting sandboxes with the same tag, at a time when no other live process may
// own them (a daemon: once it holds its state directory's lock). Each process is opened as a pidfd
// before its command line is checked, so a pid reused in between is never signalled. Processes
// that vanish meanwhile, or that this process may not signal, are skipped; the error reports only
// a /proc that cannot be listed.
func KillLeftovers(tag string) (int, error) {
	if !validOwnerTag(tag) {
		return 0, fmt.Errorf("nsinit: owner tag %q is not a valid tag", tag)
	}
	want := []string{strings.Join([]string{procName, initMarker, tag}, "\x00") + "\x00",
		strings.Join([]string{procName, zygoteMarker, tag}, "\x00") + "\x00"}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("nsinit: list processes: %w", err)
	}
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if killLeftover(pid, want) {
			killed++
		}
	}
	return killed, nil
}

// killLeftover SIGKILLs process pid when its command line is exactly one of cmdlines, and reports
// whether it did. The pidfd is taken first: if pid is reused after that, the signal goes nowhere
// (ESRCH).
func killLeftover(pid int, cmdlines []string) bool {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(pidfd)
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !slices.Contains(cmdlines, string(data)) {
		return false
	}
	return unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0) == nil
}
