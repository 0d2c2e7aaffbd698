package nsinit

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// TestZygoteThreadStuckOnAPlanPath: a hostile FUSE server in a workspace answers the host's look
// at a plan path and never answers the zygote's (it sees who asks). The zygote's thread then waits
// as root in the kernel while it resolves the plan, where no signal of the host reaches it (an
// init in its place is the process the host kills). The call must still end for the host: at the
// plan's deadline, or when the host kills the sandbox's process group; with egress, the host's wait
// for the listeners (which the stuck thread would send) ends too.
func TestZygoteThreadStuckOnAPlanPath(t *testing.T) {
	pool := zygotePool(t)
	mnt := fixture.HostileFUSE(t, func(pid uint32) bool {
		return strings.HasPrefix(cmdline(int(pid)), procName+" "+zygoteMarker) ||
			strings.HasPrefix(tgidCmdline(pid), procName+" "+zygoteMarker)
	})
	for _, c := range []struct{ byDeadline, egress bool }{{true, false}, {false, false}, {true, true}} {
		byDeadline := c.byDeadline
		p := plan(t, "/bin/true", nil)
		p.ReadOnly = append(p.ReadOnly, filepath.Join(mnt, "d"))
		if byDeadline {
			p.Timeout = time.Second
		}
		if c.egress {
			UseEgress(&p)
		}
		cmd, stdio := takeReady(t, pool, p, false)
		t.Cleanup(func() { cmd.report.Close() }) // the host lets go, also when the test fails
		if !byDeadline {
			_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL) // what the runner does at its timeout
		}
		if c.egress && listenersWithin(t, cmd) == nil {
			t.Error("egress: the stuck thread's call gave listeners")
		}
		select {
		case <-cmd.Ended():
		case <-time.After(30 * time.Second): // a bound, not a measurement
			t.Fatalf("deadline %v: the call did not end for the host within 30s of its end while the zygote's thread hangs", byDeadline)
		}
		if _, ok := cmd.Reported(); ok || cmd.Failure() == nil {
			t.Errorf("deadline %v: the call reported an end although its program never ran", byDeadline)
		}
		for _, f := range []*os.File{stdio.Out, stdio.Err} {
			f.Close()
		}
	}
	requireZygoteServed(t, pool, 3)
	closeWithin(t, pool) // its threads still hang: a daemon's stop must not wait for them
}

// listenersWithin returns what cmd.Listeners returned (the listeners closed), and fails t unless
// it returns within 30 seconds.
func listenersWithin(t *testing.T, cmd *Cmd) error {
	t.Helper()
	listeners := make(chan error, 1)
	go func() {
		ls, err := cmd.Listeners()
		if err == nil {
			ls.Close()
		}
		listeners <- err
	}()
	select {
	case err := <-listeners:
		return err
	case <-time.After(30 * time.Second): // a bound, not a measurement
		t.Fatal("the host's wait for the listeners did not end within 30s although the call's sandbox ended or its deadline passed")
		return nil
	}
}

// closeWithin closes pool and fails t unless Close returns within 30 seconds.
func closeWithin(t *testing.T, pool *Pool) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second): // a bound, not a measurement
		t.Fatal("Pool.Close did not return within 30s while zygote threads hang in the kernel")
	}
}

// tgidCmdline is the command line of the process whose thread tid is.
func tgidCmdline(tid uint32) string {
	if pid := tgidOf(tid); pid >= 0 {
		return cmdline(pid)
	}
	return ""
}

// tgidOf is the process (thread group) of thread tid, or -1.
func tgidOf(tid uint32) int {
	st, _ := statusFile("/proc/" + strconv.Itoa(int(tid)) + "/status")
	if pid, err := strconv.Atoi(st["Tgid"]); err == nil {
		return pid
	}
	return -1
}

// TestZygoteStuckThreadsDoNotHoldThePool: each call made on the hostile FUSE path leaves a zygote
// thread waiting in the kernel, where even SIGKILL does not end it (a FUSE request the server has
// read is waited for uninterruptibly), so the zygote process can never be reaped. Such calls must
// not pile up in one zygote, and they must not hold the pool: after zygoteMaxAbandoned of them the
// pool starts another zygote, which serves the later calls, and Close returns (a daemon's stop
// does not hang) although the old zygote cannot exit.
func TestZygoteStuckThreadsDoNotHoldThePool(t *testing.T) {
	pool := zygotePool(t)
	mnt := fixture.HostileFUSE(t, func(pid uint32) bool {
		return strings.HasPrefix(cmdline(int(pid)), procName+" "+zygoteMarker) ||
			strings.HasPrefix(tgidCmdline(pid), procName+" "+zygoteMarker)
	})
	first := pool.zygote().cmd.Process.Pid
	for i := range zygoteMaxAbandoned {
		p := plan(t, "/bin/true", nil)
		p.ReadOnly = append(p.ReadOnly, filepath.Join(mnt, "d"))
		p.Timeout = time.Second
		cmd, stdio := takeReady(t, pool, p, false)
		select {
		case <-cmd.Ended():
		case <-time.After(30 * time.Second): // a bound, not a measurement
			t.Fatalf("call %d did not end for the host while the zygote's thread hangs", i)
		}
		if cmd.Failure() == nil {
			t.Fatalf("call %d: no failure although its program never ran", i)
		}
		stdio.Out.Close()
		stdio.Err.Close()
	}
	requireZygoteServed(t, pool, zygoteMaxAbandoned)
	served := pool.Stats().Zygote
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r := runPooled(t, pool, sh(t, "echo ok")); r.code != 0 || r.stdout != "ok\n" {
			t.Fatalf("a call after the stuck ones: exit %d, %q, %v", r.code, r.stdout, r.failure)
		}
		if z := pool.zygote(); z != nil && z.cmd.Process.Pid != first && pool.Stats().Zygote > served {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no other zygote served a call within 30s of %d abandoned calls (%+v)", zygoteMaxAbandoned, pool.Stats())
		}
	}
	closeWithin(t, pool)
}

// TestSplitGrantSkipsADeadMount: a granted tree split around a denied path holds a FUSE mount
// whose server is gone (a crashed sshfs: every stat of it fails with ENOTCONN). The sandbox is
// still built — the dead mount gets no rule, so it stays unreadable, fail closed — instead of
// every call whose grant covers it failing.
func TestSplitGrantSkipsADeadMount(t *testing.T) {
	requireRoot(t)
	base := workTree(t, "/var/tmp")
	ro := filepath.Join(base, "ro")
	dead := filepath.Join(ro, "dead")
	if err := os.Mkdir(dead, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fixture.Missing(t, "no FUSE: %v", err)
	}
	opts := "fd=" + strconv.Itoa(fd) + ",rootmode=40000,user_id=0,group_id=0,allow_other"
	if err := unix.Mount("clihost-dead", dead, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		fixture.Missing(t, "cannot mount FUSE: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dead, unix.MNT_DETACH) })
	unix.Close(fd) // the server is gone: the connection is dead
	var st unix.Stat_t
	if err := unix.Stat(dead, &st); !errors.Is(err, unix.ENOTCONN) {
		t.Fatalf("stat of the dead mount: %v, want ENOTCONN", err)
	}
	p := sh(t, "cat "+filepath.Join(ro, "allowed")+"; ls "+dead+"; echo status=$?", "/bin/cat", "/bin/ls")
	p.ReadOnly = append(p.ReadOnly, ro)
	p.Deny = []string{filepath.Join(ro, "secret")}
	r := run(t, p)
	if r.failure != nil || r.code != 0 || !strings.HasPrefix(r.stdout, "allowed content\n") || strings.Contains(r.stdout, "status=0") {
		t.Fatalf("exit %d, failure %v, stdout %q: want the sandbox built, the allowed file read and the dead mount not listed", r.code, r.failure, r.stdout)
	}
}
