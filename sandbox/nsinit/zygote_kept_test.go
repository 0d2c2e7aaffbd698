package nsinit

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/cgroup"
	"golang.org/x/sys/unix"
)

// awaitKept waits until every call's background Finish has ended (WaitFinished: a call's group is
// kept or removed there, after its end), and then fails t unless pool keeps n control groups.
func awaitKept(t *testing.T, pool *Pool, n int) {
	t.Helper()
	if !WaitFinished(10 * time.Second) {
		t.Fatal("the calls' groups were neither kept nor removed within 10s")
	}
	pool.mu.Lock()
	kept := pool.keptCount
	pool.mu.Unlock()
	if kept != n {
		t.Fatalf("the pool keeps %d control groups, want %d (stats %+v)", kept, n, pool.Stats())
	}
}

// requireCallGroups fails under CI=true, and skips elsewhere, when a call gets no control group
// for its processes here.
func requireCallGroups(t *testing.T) {
	t.Helper()
	if cgroup.Default().Mechanism(cgroup.Pids) == cgroup.None {
		fixture.Missing(t, "no pids controller for the call's groups: %s", cgroup.Default().Reason())
	}
}

// TestKeptGroupServesOnlyItsCaller: the control group of a zygote call that ended is given to the
// next call of the same caller, uid and limits, and never to a call of another caller (whose
// memory.stat would show the file pages the last call left charged to it) or with other limits.
func TestKeptGroupServesOnlyItsCaller(t *testing.T) {
	pool := zygotePool(t)
	requireCallGroups(t)
	uid := sh(t, "exit 0").UID
	call := func(key string, pids int64) {
		t.Helper()
		p := sh(t, "exit 0")
		p.NetworkKey, p.Limits = key, isolation.Limits{Pids: pids}
		if r := runPooled(t, pool, p); r.code != 0 || r.failure != nil {
			t.Fatalf("exit %d, failure %v", r.code, r.failure)
		}
	}
	reused := func() int64 { return pool.Stats().GroupsReused }

	call("uid:1000", 64)
	awaitKept(t, pool, 1)
	call("uid:1000", 64)
	if got := reused(); got != 1 {
		t.Fatalf("the caller's second call was given %d kept groups, want 1", got)
	}
	awaitKept(t, pool, 1)
	call("uid:1001", 64)
	call("uid:1000", 32)
	if got := reused(); got != 1 {
		t.Fatalf("%d kept groups were given; a call of another caller, or with other limits, took the caller's", got-1)
	}
	awaitKept(t, pool, 3) // each keeps its own
	pool.mu.Lock()
	kept := len(pool.kept[keptKey{caller: "uid:1000", uid: uid, limits: cgroup.Limits{Pids: 64}}])
	pool.mu.Unlock()
	if kept != 1 {
		t.Fatalf("the first caller's group is not kept for it (%d)", kept)
	}
	requireZygoteServed(t, pool, 4)
}

// TestKeptGroupCountsOnlyItsNextCall: a call given a kept group is judged by what it did alone: its
// CPU time limit is its own (the last call's CPU time does not count toward it), and a limit the
// last call reached keeps its group from being kept at all.
func TestKeptGroupCountsOnlyItsNextCall(t *testing.T) {
	pool := zygotePool(t)
	requireCallGroups(t)
	if cgroup.Default().Mechanism(cgroup.CPU) == cgroup.None {
		fixture.Missing(t, "no CPU accounting for the call's groups: %s", cgroup.Default().Reason())
	}
	// Each call uses a little more than half its CPU time limit and fails (Exhausted names a limit
	// only for a program that failed).
	limits := isolation.Limits{Pids: 64, CPU: 400 * time.Millisecond}
	burn := sh(t, `i=0; end=$(( $(date +%s%N) + 250000000 )); while [ $(date +%s%N) -lt $end ]; do i=$((i+1)); done; exit 3`, "/bin/date")
	burn.NetworkKey, burn.Limits = "uid:1000", limits
	for i := range 2 {
		cmd, stdio := takeReady(t, pool, burn, false)
		output := readStreams(stdio)
		<-cmd.Ended()
		status, ok := cmd.Reported()
		_, stderr := output()
		if err := cmd.Failure(); err != nil || !ok || status != 3 {
			t.Fatalf("call %d: status %d (reported %t), failure %v, stderr %q", i, status, ok, err, stderr)
		}
		if got := cmd.Exhausted(false); got != "" {
			t.Fatalf("call %d: Exhausted() = %q: the CPU time of the call before it counted toward its limit", i, got)
		}
		cmd.Finish(func(err error) { t.Error(err) })
		awaitKept(t, pool, 1)
	}
	if got := pool.Stats().GroupsReused; got != 1 {
		t.Fatalf("the second call was not given the first's group (%d)", got)
	}

	// A call that reaches its process limit leaves no group to keep.
	bomb := sh(t, `sh -c 'n=0; while [ $n -lt 80 ]; do sleep 5 & n=$((n+1)); done' 2>/dev/null; exit 3`, "/bin/sleep")
	bomb.NetworkKey, bomb.Limits = "uid:1000", limits
	r := runPooled(t, pool, bomb)
	if r.code != 3 {
		t.Fatalf("exit %d, failure %v", r.code, r.failure)
	}
	if got := pool.Stats().GroupsReused; got != 2 {
		t.Fatalf("the bomb was not given the kept group (%d)", got)
	}
	awaitKept(t, pool, 0)
}

// TestEndOnlyOnceNothingRuns: the zygote reports a call's end before its PID 1 has exited only when
// PID 1 has no child left (sandboxEmpty); a program that leaves processes behind gets its end once
// PID 1's exit has taken them all. The host reads PID 1's children the moment it has the end: none,
// whichever way the call ended. (Fifty background processes make PID 1's exit long enough to be
// seen: an end reported before it would find them still there.)
func TestEndOnlyOnceNothingRuns(t *testing.T) {
	pool := zygotePool(t)
	for i, script := range []string{
		`exit 0`,
		`n=0; while [ $n -lt 50 ]; do /bin/sleep 30 & n=$((n+1)); done; exit 0`,
		`(n=0; while [ $n -lt 50 ]; do /bin/sleep 30 & n=$((n+1)); done) & sleep 0.05; exit 0`,
	} {
		p := sh(t, script, "/bin/sleep")
		p.Seccomp, p.NoExecMemfd = true, true // as every call's plan (the seccomp filter refuses CLONE_PARENT)
		cmd, stdio := takeReady(t, pool, p, false)
		output := readStreams(stdio)
		<-cmd.Ended()
		pid := strconv.Itoa(cmd.Process.Pid)
		children, _ := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
		_, stderr := output()
		if err := cmd.Failure(); err != nil {
			t.Fatalf("call %d: %v (stderr %q)", i, err, stderr)
		}
		if status, ok := cmd.Reported(); !ok || status != 0 {
			t.Fatalf("call %d: status %d (reported %t), stderr %q", i, status, ok, stderr)
		}
		if n := len(strings.Fields(string(children))); n > 0 {
			t.Errorf("call %d: its end came while PID 1 still had %d children", i, n)
		}
		cmd.Finish(func(err error) { t.Error(err) })
	}
	requireZygoteServed(t, pool, 3)
}

// TestOwnPIDsOnlyInTheProcessesOwnProcfs: the zygote reads PID 1's children by the pid its clone
// returned only from a procfs of its own PID namespace. This test process's /proc is its own; a
// copy of it started in a new PID namespace, with this /proc still mounted, is not in one of its
// own (there the number would name another process: review 17).
func TestOwnPIDsOnlyInTheProcessesOwnProcfs(t *testing.T) {
	proc := func() int {
		fd, err := unix.Open("/proc/self", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	if os.Getenv(ownPIDsInnerEnv) == "1" {
		if ownPIDs(proc()) {
			t.Fatal("in a PID namespace with its parent's /proc, ownPIDs says the pids are its own")
		}
		return
	}
	if !ownPIDs(proc()) {
		t.Fatal("in its own PID namespace's procfs, ownPIDs says the pids are not its own")
	}
	requireRoot(t)
	rerunInPIDNamespace(t, ownPIDsInnerEnv)
}

// rerunInPIDNamespace runs t's test again in a copy of this test binary that is PID 1 of a new PID
// namespace (the mount namespace, and so /proc, stay this process's), with env=1 in its
// environment, and fails t when it fails.
func rerunInPIDNamespace(t *testing.T, env string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the run in a new PID namespace (with this /proc): %v", err)
	}
}

// ownPIDsInnerEnv marks the copy of the test binary TestOwnPIDsOnlyInTheProcessesOwnProcfs runs in
// a new PID namespace.
const ownPIDsInnerEnv = "NSINIT_TEST_OWNPIDS_INNER"
