package nsinit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// Review 17: attacks on 9036c0b, where the zygote's thread writes a call's end line before its
// PID 1 has exited when the program ran under the seccomp filter and PID 1's children file
// (/proc/PID/task/PID/children, opened through the zygote's /proc/self) is empty once the program
// was waited for (sandboxEmpty).
//
// Every attack here leaves a process of the sandbox blocked in the kernel on a FUSE request that
// the test's server holds (a request the server has read waits uninterruptibly, SIGKILL or not):
// PID 1's exit cannot complete while it is held, and neither may the call's end come. Whatever way
// the zygote decided, an end written while the request is held is an end while a process of the
// sandbox still exists; and the end, when it comes, must find PID 1 exited (the slow way) or the
// request released. The bounded wait below is only how long the test gives a wrong end to arrive
// (it comes within microseconds of the program's exit when it does): a correct zygote never sends
// it while the request is held, however long the test waits.

// r17Hold is how long a call's end is given to come (wrongly) while a request is held.
const r17Hold = 2 * time.Second

// r17HeldEnd runs p (its program leaves, or is, a process blocked on a request srv holds) and
// fails t when the host sees the call's end while the request is still held, or when the call is
// not reported with status want once the request was released.
func r17HeldEnd(t *testing.T, pool *Pool, srv *fixture.FUSEServer, name string, p isolation.Plan, want int) {
	t.Helper()
	cmd, stdio := takeReady(t, pool, p, true)
	r17Check(t, srv, name, cmd, stdio, want)
}

// r17Check is r17HeldEnd's check of the call cmd (with its streams stdio, input on a pipe),
// taken. Once a request is held it writes a line to the program's input and closes it: the
// program's go-ahead to exit (so that it never exits before its leftover is held).
func r17Check(t *testing.T, srv *fixture.FUSEServer, name string, cmd *Cmd, stdio *Stdio, want int) {
	t.Helper()
	t.Cleanup(func() { cmd.report.Close() })
	output := readStreams(stdio)
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	for deadline := time.Now().Add(10 * time.Second); len(srv.Held()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			srv.Release()
			t.Fatalf("%s: no request of the sandbox reached the FUSE server: the attack proves nothing", name)
		}
	}
	_, _ = stdio.In.Write([]byte("go\n"))
	stdio.In.Close()
	select {
	case <-cmd.Ended():
		status, ok := cmd.Reported()
		t.Errorf("%s (ahead %t): the host saw the call's end (reported %t, status %d, failure %v) while a process "+
			"of its sandbox (threads %v) was still blocked in the kernel; PID 1 (%d) exited: %t",
			name, cmd.ahead, ok, status, cmd.Failure(), srv.Held(), cmd.Process.Pid, pidfdExited(pidfd))
	case <-time.After(r17Hold): // the right behaviour: no end while the request is held
	}
	srv.Release()
	select {
	case <-cmd.Ended():
	case <-time.After(30 * time.Second): // a bound, not a measurement
		cmd.Abandon()
		<-cmd.Ended()
		t.Fatalf("%s: the call did not end within 30s of the request's release", name)
	}
	stdout, stderr := output()
	status, ok := cmd.Reported()
	if !ok || status != want {
		t.Errorf("%s: reported %t, status %d (want %d), failure %v, stdout %q, stderr %q", name, ok, status, want, cmd.Failure(), stdout, stderr)
	}
	cmd.Finish(func(err error) { t.Error(err) })
}

// r17Plan is the plan of a call running script (with perl, whose syscall() makes the raw system
// calls) that may read the FUSE directory dir, under the seccomp filter as every plan clihost makes.
func r17Plan(t *testing.T, script, dir string) isolation.Plan {
	t.Helper()
	p := sh(t, "D="+dir+"\n"+script, "/bin/ls", "/bin/sleep", "/usr/bin/perl")
	p.ReadOnly = append(p.ReadOnly, dir, "/usr/share/perl", "/usr/share/perl5", "/etc/perl")
	p.Seccomp, p.NoExecMemfd = true, true
	return p
}

// r17Attacks are the programs the review tried: each leaves behind (or is) a process, or a thread,
// blocked on a request of the FUSE directory $D, in one of the shapes the end's check must see.
var r17Attacks = []struct {
	name, script string
	status       int
	timeout      time.Duration
}{
	// A double fork: the blocked process is an orphan, PID 1's child once its parent exited.
	{name: "orphan", script: `( /bin/ls $D </dev/null >/dev/null 2>&1 & ); read x; exit 0`},
	// Its own session and process group: the host's kill of the sandbox's process group misses it.
	{name: "own session", script: `/usr/bin/perl -e 'use POSIX; POSIX::setsid(); opendir(my $d, $ARGV[0])' $D </dev/null >/dev/null 2>&1 &
read x; exit 0`},
	// A child subreaper: the grandchild goes to it, not to PID 1, when its parent exits; it exits
	// after, and the grandchild goes on to PID 1 (the subreaper's own parent is the zygote's
	// thread, outside the PID namespace, which the kernel's search for a reaper does not pass).
	{name: "subreaper", script: `exec /usr/bin/perl -e '
syscall(157, 36, 1, 0, 0, 0) == 0 or die "PR_SET_CHILD_SUBREAPER: $!";
my $a = fork // die; if ($a == 0) { my $b = fork // die; if ($b == 0) { opendir(my $d, $ARGV[0]); exit 0 } exit 0 }
waitpid($a, 0); my $go = <STDIN>; exit 0' $D >/dev/null 2>&1`},
	// A child whose leader thread exited (a raw exit of one thread) while another of its threads
	// is blocked: a zombie leader whose thread group is not empty.
	{name: "thread of an exited leader", script: `/usr/bin/perl -e '
use threads; threads->create(sub { opendir(my $d, $ARGV[0]); })->detach; syscall(60, 0)' $D </dev/null >/dev/null 2>&1 &
read x; exit 0`},
	// The program itself: its leader exits (raw exit of one thread) while another thread of it is
	// blocked, so that its pid turns zombie while its thread group still runs.
	{name: "the program's own thread", script: `exec /usr/bin/perl -e '
use threads; threads->create(sub { opendir(my $d, $ARGV[0]); })->detach; syscall(60, 0)' $D </dev/null >/dev/null 2>&1`},
	// The deadline: PID 1 is killed while the program still runs; the program dies at once, the
	// blocked process is reparented to the dying PID 1.
	{name: "deadline", script: `/bin/ls $D </dev/null >/dev/null 2>&1 & exec /bin/sleep 30`, status: 128 + 9, timeout: 2 * time.Second},
	// The deadline, with the blocked process an orphan already (PID 1's child) when it strikes.
	{name: "deadline, orphan", script: `( /bin/ls $D </dev/null >/dev/null 2>&1 & ); exec /bin/sleep 30`, status: 128 + 9, timeout: 2 * time.Second},
}

// TestReview17EndWaitsForWhatTheKernelHolds: every shape of leftover in r17Attacks keeps the call's
// end until its FUSE request is released. Calls one after another with pauses, so that some are
// served by sandboxes built ahead (zygote_ahead.go also ends its calls with report1).
func TestReview17EndWaitsForWhatTheKernelHolds(t *testing.T) {
	pool := zygotePool(t)
	if !pool.root {
		fixture.Missing(t, "the FUSE mount needs a root host")
	}
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		fixture.Missing(t, "no perl: %v", err)
	}
	for _, a := range r17Attacks {
		// A server of its own for each: Release answers every later request too.
		srv, mnt := fixture.HostileFUSEServer(t, func(uid, _ uint32) bool { return uid == nobody })
		p := r17Plan(t, a.script, filepath.Join(mnt, "d"))
		p.Timeout = a.timeout
		r17HeldEnd(t, pool, srv, a.name, p, a.status)
		time.Sleep(20 * aheadPause) // room for a sandbox to be built ahead for the next call
	}
	requireZygoteServed(t, pool, int64(len(r17Attacks)))
}

// TestReview17SeccompRefusesCloneParentAndItsDetours: sandboxEmpty's premise is that a filtered
// program cannot make a process whose parent is outside PID 1's tree. clone(CLONE_PARENT) (and any
// flag above the low 32 bits, which the kernel drops), clone3 (whose flags the filter cannot read),
// ptrace, setns/unshare, io_uring (whose workers are threads of the ring's owner) and
// process_vm_writev (into PID 1) must all fail in the sandbox.
func TestReview17SeccompRefusesCloneParentAndItsDetours(t *testing.T) {
	pool := zygotePool(t)
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		fixture.Missing(t, "no perl: %v", err)
	}
	// clone(flags, stack 0, ...): with CLONE_PARENT a child that would run this script on: it
	// exits at once (the zygote's thread reaps it either way). 0x8000 is CLONE_PARENT, 17 SIGCHLD.
	script := `exec /usr/bin/perl -e '
sub try { my ($what, @a) = @_; $! = 0; my $r = syscall($a[0], @a[1..$#a]); if ($r == 0) { exit 0 } print "$what: ", ($r < 0 ? ($!+0) : "made $r"), "\n" }
try("clone parent", 56, 0x8000 | 17, 0, 0, 0, 0);
try("clone parent high", 56, (1 << 32) | 0x8000 | 17, 0, 0, 0, 0);
try("clone3", 435, 0, 0);
try("ptrace traceme", 101, 0, 0, 0, 0);
try("unshare pid", 272, 0x20000000);
try("setns", 308, 0, 0);
try("io_uring_setup", 425, 1, 0);
try("process_vm_writev", 311, 1, 0, 0, 0, 0, 0);
print "done\n"'`
	p := sh(t, script, "/usr/bin/perl")
	p.ReadOnly = append(p.ReadOnly, "/usr/share/perl", "/usr/share/perl5", "/etc/perl")
	p.Seccomp, p.NoExecMemfd = true, true
	r := runPooled(t, pool, p)
	if r.code != 0 || r.failure != nil || !strings.HasSuffix(r.stdout, "done\n") {
		t.Fatalf("exit %d, failure %v, stdout %q, stderr %q", r.code, r.failure, r.stdout, r.stderr)
	}
	got := lines(r.stdout)
	want := map[string]string{
		"clone parent":      strconv.Itoa(int(unix.EPERM)),
		"clone parent high": strconv.Itoa(int(unix.EPERM)),
		"clone3":            strconv.Itoa(int(unix.ENOSYS)),
		"ptrace traceme":    strconv.Itoa(int(unix.EPERM)),
		"unshare pid":       strconv.Itoa(int(unix.EPERM)),
		"setns":             strconv.Itoa(int(unix.EPERM)),
		"io_uring_setup":    strconv.Itoa(int(unix.EPERM)),
		"process_vm_writev": strconv.Itoa(int(unix.EPERM)),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want errno %s (stdout %q)", k, got[k], v, r.stdout)
		}
	}
	requireZygoteServed(t, pool, 1)
}

// review17InnerEnv marks the copy of the test binary that TestReview17ProcOfAnotherPIDNamespace
// runs in a PID namespace of its own that has no procfs of its own: /proc is its parent's.
const review17InnerEnv = "NSINIT_TEST_REVIEW17_INNER"

// TestReview17ProcOfAnotherPIDNamespace: startPID1 opens PID 1's children file by number,
// "../<pid>/task/<pid>/children" from the zygote's /proc/self. The number is PID 1's in the
// zygote's PID namespace (clone's return); the file is that of whatever process has the number in
// the PID namespace of the procfs mounted at /proc. A host (so its zygote) that runs in a PID
// namespace without a /proc of its own (`unshare --pid --fork` without --mount-proc, a service or
// container that kept its parent's /proc) reads another process's children there: a kernel thread
// of the parent namespace has none, and the end then comes at once, while what the program left
// runs on. Here a leftover blocked on a FUSE request must keep the end, as it does on a host whose
// /proc is its own (TestReview17EndWaitsForWhatTheKernelHolds).
func TestReview17ProcOfAnotherPIDNamespace(t *testing.T) {
	if os.Getenv(review17InnerEnv) == "1" {
		review17Inner(t)
		return
	}
	requireRoot(t)
	if testPool != nil {
		t.Skip("this is a pooled run")
	}
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children"); err != nil {
		fixture.Missing(t, "no children file (CONFIG_PROC_CHILDREN): %v", err)
	}
	rerunInPIDNamespace(t, review17InnerEnv)
}

// review17Inner runs, as PID 1 of a PID namespace whose /proc is its parent's, calls whose program
// leaves a process blocked on a held FUSE request, until one's PID 1 has a number that in /proc
// names a process without children (what the zygote then reads as PID 1's). A sandbox (or zygote)
// that refuses to run here at all is safe too: today Check fails, and zygote_net.go's openOwn
// would (it names the thread's /proc/self/task/TID by its tid in the zygote's namespace, which
// /proc does not list).
func review17Inner(t *testing.T) {
	if os.Getpid() != 1 {
		t.Fatalf("not PID 1 of a new PID namespace (pid %d)", os.Getpid())
	}
	if err := Check(); err != nil {
		t.Logf("holds: the sandbox refuses a PID namespace whose /proc is another's: %v", err)
		return
	}
	pool := newTestPool(t)
	awaitZygote(pool)
	pool.mu.Lock()
	z, zerr := pool.zyg, pool.zygErr
	pool.mu.Unlock()
	if z == nil {
		t.Logf("holds: no zygote in a PID namespace whose /proc is another's (%v)", zerr)
		return
	}
	meaningful := 0
	for i := 0; i < 40 && meaningful == 0; i++ {
		srv, mnt := fixture.HostileFUSEServer(t, func(uid, _ uint32) bool { return uid == nobody })
		p := r17Plan(t, `( /bin/ls $D </dev/null >/dev/null 2>&1 & ); read x; exit 0`, filepath.Join(mnt, "d"))
		var cmd *Cmd
		var stdio *Stdio
		for deadline := time.Now().Add(10 * time.Second); cmd == nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			var err error
			if cmd, stdio, err = pool.Take(p, true, nil); err != nil {
				t.Logf("holds: the zygote serves no call in a PID namespace whose /proc is another's: %v", err)
				return
			}
		}
		if cmd == nil {
			t.Fatalf("no call taken within 10s (stats %+v)", pool.Stats())
		}
		pid := strconv.Itoa(cmd.Process.Pid)
		// What the zygote opened as PID 1's children: the process of that number in /proc's
		// (the parent) namespace.
		kids, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
		comm, _ := os.ReadFile("/proc/" + pid + "/comm")
		if err == nil && len(strings.Fields(string(kids))) == 0 {
			meaningful++
			t.Logf("call %d: PID 1 is %s here; /proc/%s is %q of the parent namespace, without children", i, pid, pid, strings.TrimSpace(string(comm)))
			r17Check(t, srv, fmt.Sprintf("call %d", i), cmd, stdio, 0)
			continue
		}
		// Not a trial that can show anything: let the call end.
		t.Logf("call %d: PID 1 is %s here; /proc/%s (%q) has children %q (%v)", i, pid, pid, strings.TrimSpace(string(comm)), kids, err)
		output := readStreams(stdio)
		for deadline := time.Now().Add(10 * time.Second); len(srv.Held()) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		}
		srv.Release()
		stdio.In.Close()
		<-cmd.Ended()
		output()
		cmd.Finish(func(err error) { t.Error(err) })
	}
	if meaningful == 0 {
		t.Log("no call's PID 1 had a number naming a childless process in /proc: nothing shown")
	}
}
