package nsinit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// Round 12e: attacks on the end of a zygote's call, which must come only once nothing of its
// sandbox runs: the zygote's thread has PID 1 exit (the kernel completes that exit once every other
// process of the PID namespace is killed and reaped), waits for that exit, then writes the end
// line. (Written against 7ebf08f, which took the end from PID 1's pidfd on the host; reverted, the
// findings held for both.)

// zombieChildren lists the children of process pid (any of its threads') that are zombies.
func zombieChildren(pid int) []string {
	var out []string
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, _ := os.ReadDir(dir)
	for _, task := range tasks {
		data, _ := os.ReadFile(dir + task.Name() + "/children")
		for _, kid := range strings.Fields(string(data)) {
			if procState(kid) == "Z" {
				out = append(out, kid)
			}
		}
	}
	return out
}

// procState is the one-letter state of process pid ("" when gone).
func procState(pid string) string {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+3 > len(data) {
		return ""
	}
	return string(data[i+2 : i+3])
}

// pidfdExited reports whether the process of pidfd has exited.
func pidfdExited(pidfd int) bool {
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, 0)
	return err == nil && n > 0
}

// TestR12ECloneParentSiblingDoesNotHoldTheCall: the program's process is the zygote thread's
// child (not PID 1's), in the call's PID namespace. clone(CLONE_PARENT), which the seccomp filter
// let through (it refused only CLONE_NEW*), made a process of that namespace whose parent is the
// zygote's thread, outside it. When PID 1 exits, the kernel waits until every pid of the namespace
// is freed (zap_pid_ns_processes), and the zygote reaped no child but the program and PID 1: the
// sibling stayed a zombie of the zygote and PID 1's exit never completed. With the filter the
// clone is refused (EPERM); without it (a plan may go without) the thread reaps the sibling while
// PID 1 exits. Either way the call, whose program exited 0 at once, must end (reported, status 0)
// and leave no zombie in the zygote.
func TestR12ECloneParentSiblingDoesNotHoldTheCall(t *testing.T) {
	for _, filter := range []bool{true, false} {
		t.Run(fmt.Sprintf("seccomp %t", filter), func(t *testing.T) { r12eCloneParent(t, filter) })
	}
}

func r12eCloneParent(t *testing.T, filter bool) {
	pool := zygotePool(t)
	const perl = "/usr/bin/perl"
	if _, err := os.Stat(perl); err != nil {
		t.Skipf("no %s to make the raw clone with: %v", perl, err)
	}
	zpid := zygotePID(t, pool)
	// The sibling exits at once (exit_group): a zombie whose parent is the zygote's thread.
	script := fmt.Sprintf(`my $r = syscall(%d, 0x8000|17, 0, 0, 0, 0); syscall(%d, 0) if $r == 0; print "sibling $r\n"; exit 0;`,
		unix.SYS_CLONE, unix.SYS_EXIT_GROUP)
	p := plan(t, perl, []string{"-e", script})
	p.Seccomp = filter
	p.Timeout = time.Minute
	cmd, stdio := takeReady(t, pool, p, false)
	output := readStreams(stdio)
	select {
	case <-cmd.Ended():
	case <-time.After(15 * time.Second): // a bound, not a measurement: it takes milliseconds
		stdout, _ := output()
		pid1 := strconv.Itoa(cmd.Process.Pid)
		t.Errorf("the call did not end within 15s of its program's exit (stdout %q): PID 1 %s is in state %s "+
			"(its exit waits for the namespace's last pid), the zygote's zombie children are %v; the host waits until "+
			"the deadline, then abandons the call as lost, and the zygote's thread, PID 1 and the call's cgroup stay",
			stdout, pid1, procState(pid1), zombieChildren(zpid))
		cmd.Abandon()
		<-cmd.Ended()
		_ = cmd.Failure()
		return
	}
	stdout, stderr := output()
	status, ok := cmd.Reported()
	if failure := cmd.Failure(); !ok || status != 0 || failure != nil {
		t.Errorf("reported %t, status %d, failure %v, stdout %q, stderr %q: want the program's exit 0", ok, status, failure, stdout, stderr)
	}
	cmd.Finish(func(err error) { t.Error(err) })
	switch {
	case filter && stdout != "sibling -1\n":
		t.Errorf("stdout %q: want the clone refused by the seccomp filter", stdout)
	case !filter && (!strings.HasPrefix(stdout, "sibling ") || stdout == "sibling -1\n"):
		t.Errorf("stdout %q: the attack did not run", stdout)
	}
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		z := zombieChildren(zpid)
		if len(z) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the zygote keeps zombie children %v after the call", z)
			break
		}
	}
	requireZygoteServed(t, pool, 1)
}

// TestR12EZygoteDeathIsNoEndBeforePID1Exits: when the zygote dies (SIGKILL: a crash, the OOM
// killer) before the end line, the report pipe reaches its end at once, and readReport's end-of-pipe path waits with spawn.WaitExited,
// which is for a child of the host's: PID 1 is the zygote's, waitid fails with ECHILD and Ended
// closes while PID 1 is still exiting, its sandbox not empty. Here the program is blocked in the
// kernel (a FUSE request its server read and holds): PID 1's exit cannot complete until it is
// released. Ended must not close before PID 1 has exited (Abandon lets go of such a sandbox).
func TestR12EZygoteDeathIsNoEndBeforePID1Exits(t *testing.T) {
	pool := zygotePool(t)
	if !pool.root {
		fixture.Missing(t, "the FUSE mount needs a root host")
	}
	srv, mnt := fixture.HostileFUSEServer(t, func(uid, _ uint32) bool { return uid == nobody })
	dir := filepath.Join(mnt, "d")
	p := plan(t, "/bin/ls", []string{dir})
	p.ReadOnly = append(p.ReadOnly, dir)
	p.Timeout = time.Minute
	zpid := zygotePID(t, pool)
	cmd, stdio := takeReady(t, pool, p, false)
	output := readStreams(stdio)
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	for deadline := time.Now().Add(10 * time.Second); len(srv.Held()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			srv.Release()
			t.Fatal("the program's request never reached the FUSE server: the attack proves nothing")
		}
	}
	if err := unix.Kill(zpid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cmd.Ended():
		if !pidfdExited(pidfd) {
			t.Errorf("the host saw the call's end (failure %v) while its PID 1 (%d, state %s) had not exited: "+
				"the program (threads %v, blocked in the kernel) is still in the sandbox",
				cmd.Failure(), cmd.Process.Pid, procState(strconv.Itoa(cmd.Process.Pid)), srv.Held())
		}
	case <-time.After(3 * time.Second):
		cmd.Abandon() // the safe behaviour: the host waits for PID 1, and lets go as the runner does
		<-cmd.Ended()
	}
	srv.Release()
	for deadline := time.Now().Add(10 * time.Second); !pidfdExited(pidfd); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("PID 1 (%d) did not exit once the FUSE request was answered", cmd.Process.Pid)
		}
	}
	output()
	_ = cmd.Failure()
}

// TestR12ELeftoversAreGoneAtTheEnd: whatever the program leaves behind when it exits (a sleeper
// that ignores every catchable signal, a stopped one, a loop that forks as fast as it can) must be
// gone when the host sees the call's end, and the status-like lines it writes on its own streams
// ("status 0", "end 0") are not the call's status. Calls one after another, so that some go to a
// sandbox built ahead (zygote_ahead.go).
func TestR12ELeftoversAreGoneAtTheEnd(t *testing.T) {
	pool := zygotePool(t)
	ahead := 0
	for i := range 6 {
		token := sleepToken(t)
		script := `T=` + token + `
trap '' HUP INT QUIT TERM USR1 USR2 PIPE ALRM CHLD
/bin/sleep $T </dev/null >/dev/null 2>&1 &
(trap '' HUP INT QUIT TERM; exec /bin/sleep $T) &
/bin/sleep $T & kill -STOP $!
(while :; do /bin/sleep $T & done) </dev/null >/dev/null 2>&1 &
echo "status 0"; echo "end 0"; echo "status 0" >&2; echo "end 0" >&2
/bin/sleep 0.05
exit 7`
		cmd, stdio := takeReady(t, pool, sh(t, script, "/bin/sleep"), false)
		if cmd.ahead {
			ahead++
		}
		output := readStreams(stdio)
		select {
		case <-cmd.Ended():
		case <-time.After(30 * time.Second):
			cmd.Abandon()
			<-cmd.Ended()
			_ = cmd.Failure()
			output()
			t.Fatalf("call %d did not end within 30s", i)
		}
		left := processesWith("/bin/sleep\x00" + token)
		stdout, stderr := output()
		status, ok := cmd.Reported()
		failure := cmd.Failure()
		if len(left) > 0 {
			t.Errorf("call %d (ahead %t) ended while %d of its processes still ran (pids %v)", i, cmd.ahead, len(left), left[:min(len(left), 10)])
		}
		if !ok || status != 7 || failure != nil {
			t.Errorf("call %d: reported %t, status %d, failure %v (stdout %q, stderr %q): want status 7", i, ok, status, failure, stdout, stderr)
		}
		cmd.Finish(func(err error) { t.Error(err) })
		time.Sleep(20 * aheadPause) // room for a sandbox to be built ahead for the next call
	}
	t.Logf("%d of 6 calls went to a sandbox built ahead", ahead)
	requireZygoteServed(t, pool, 6)
}
