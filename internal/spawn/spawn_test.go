package spawn

import (
	"bytes"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The close_range path runs in every Run; this covers the /proc fallback for kernels before 5.11.
func TestStrayFDsCloseOnExecByProc(t *testing.T) {
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0) // deliberately without O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC != 0 {
		t.Fatal("syscall.Open set FD_CLOEXEC; the test cannot tell anything")
	}
	if err := strayFDsCloseOnExecByProc(); err != nil {
		t.Fatal(err)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("fd %d flags %#x (%v), want FD_CLOEXEC", fd, flags, err)
	}
}

// TestChildTimerSlack: a child starts with the timer slack asked for, and one started with Start
// with Linux's default, whatever the child before it was given.
func TestChildTimerSlack(t *testing.T) {
	slackOf := func(start func(*exec.Cmd) error) string {
		t.Helper()
		var out bytes.Buffer
		cmd := exec.Command("/bin/cat", "/proc/self/timerslack_ns")
		cmd.Stdout = &out
		if err := start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	if got := slackOf(func(c *exec.Cmd) error { return StartWithTimerSlack(c, 300*time.Microsecond) }); got != "300000" {
		t.Errorf("StartWithTimerSlack 300µs: the child's slack is %s ns", got)
	}
	if got := slackOf(Start); got != "50000" {
		t.Errorf("Start after it: the child's slack is %s ns, want Linux's default 50000", got)
	}
}

// TestSpawnerKeepsItsOwnTimerSlack: the spawner's thread takes a child's timer slack for the fork
// only. It may be the process's main thread, whose slack is the process's as /proc/PID shows it
// (a unit's TimerSlackNSec=), and threads it starts inherit it.
func TestSpawnerKeepsItsOwnTimerSlack(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread's slack is changed for the test
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 250000, 0, 0, 0); err != nil {
			t.Error(err)
			return
		}
		var during int
		err := withTimerSlack(DefaultTimerSlack, func() error {
			var err error
			during, err = unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
			return err
		})
		after, _ := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
		if err != nil || during != 50000 || after != 250000 {
			t.Errorf("slack during the fork %d, after it %d (%v), want 50000 then the thread's own 250000", during, after, err)
		}
	}()
	<-done
}
