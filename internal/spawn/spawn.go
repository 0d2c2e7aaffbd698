// Package spawn starts child processes from one goroutine locked to its OS thread for the life of
// the process, so that a child's parent-death signal (Pdeathsig, tied by the kernel to the thread
// that forked it) means "the host died": the runner's commands and the sandbox's inits, whether
// started for a call or ahead of one (nsinit.Pool), all start here.
package spawn

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// spawnRequests feeds the spawner goroutine; spawnOnce starts it.
var (
	spawnRequests = make(chan spawnRequest)
	spawnOnce     sync.Once
)

type spawnRequest struct {
	cmd   *exec.Cmd
	slack time.Duration // the child's timer slack (0: DefaultTimerSlack)
	done  chan<- error
}

// DefaultTimerSlack is Linux's default timer slack (what a program started from a shell has): how
// late the kernel may wake a thread from a timed sleep, to group wake-ups. Every child starts with
// it, whatever this process's own (see StartWithTimerSlack).
const DefaultTimerSlack = 50 * time.Microsecond

// Start starts cmd from the spawner goroutine, after marking every stray descriptor of this
// process close-on-exec (strayFDsCloseOnExec). The kernel delivers Pdeathsig when the thread that
// forked the child exits, not the process; Go may end a thread whenever a goroutine that locked it
// exits. Forking only from one goroutine locked to its thread for the life of the process makes
// Pdeathsig mean "the host died". Forks are serialized by syscall.ForkLock anyway, so nothing is lost.
func Start(cmd *exec.Cmd) error { return StartWithTimerSlack(cmd, DefaultTimerSlack) }

// StartWithTimerSlack is Start with the child's timer slack (PR_SET_TIMERSLACK; its threads
// inherit it, and so do its children unless it sets another). A child inherits the slack of the
// thread that forked it, here the spawner's, which takes slack for the fork only.
func StartWithTimerSlack(cmd *exec.Cmd, slack time.Duration) error {
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: this thread must outlive every child
			for r := range spawnRequests {
				if err := strayFDsCloseOnExec(); err != nil {
					r.done <- err
					continue
				}
				r.done <- withTimerSlack(r.slack, r.cmd.Start)
			}
		}()
	})
	done := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, slack: cmp.Or(slack, DefaultTimerSlack), done: done}
	return <-done
}

// withTimerSlack runs f with the calling thread's timer slack set to slack, and sets the thread's
// own back after it: the spawner's thread may be any of this process's, even its main thread,
// whose slack is the one /proc/PID/timerslack_ns shows (a service manager's TimerSlackNSec=), and
// the threads it starts inherit it. Best effort: the slack only changes when timers fire.
func withTimerSlack(slack time.Duration, f func() error) error {
	own, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack.Nanoseconds()), 0, 0, 0)
	ferr := f()
	if err == nil && own > 0 {
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(own), 0, 0, 0)
	}
	return ferr
}

// strayFDsCloseOnExec sets close-on-exec on every descriptor of this process above stderr. Go opens
// everything close-on-exec, but the host may have inherited descriptors from whatever started it, or
// get some from code that opens without O_CLOEXEC, and a fork would hand those to every child. The
// child's own stdio is installed by dup2, which clears the flag on the copies, so nothing meant for a
// child is affected.
func strayFDsCloseOnExec() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		return strayFDsCloseOnExecByProc() // Linux < 5.11
	}
	if err != nil {
		return fmt.Errorf("close_range: %w", err)
	}
	return nil
}

// strayFDsCloseOnExecByProc is strayFDsCloseOnExec for kernels without close_range.
func strayFDsCloseOnExecByProc() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list open descriptors: %w", err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		// EBADF: the descriptor has been closed since (ReadDir's own, for one).
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("set close-on-exec on fd %d: %w", fd, err)
		}
	}
	return nil
}

// WaitExited blocks until process pid, a child of this process, has exited, without reaping it
// (its pid, and so its process group id, stay taken until Wait).
func WaitExited(pid int) {
	for {
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// Exited reports whether process pid, a child of this process, has exited, without waiting and
// without reaping it.
func Exited(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err != nil || info.Signo != 0
}
