package nsinit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// The attacks of this file are a sandboxed program's (or a hostile plan's) against the zygote
// (zygote_serve.go): a root process whose threads build every call's sandbox and whose memory a
// call's PID 1 shares. Each runs through a Pool and checks that the zygote served it.

// zygotePool is a pool for one test whose zygote is running (the test is skipped where the kernel
// cannot run one, as the pool then serves every call from inits).
func zygotePool(t *testing.T) *Pool {
	t.Helper()
	pool := newTestPool(t)
	waitZygote(t, pool)
	return pool
}

// waitZygote waits (at most 10 s) until pool's zygote runs (t is skipped where the kernel cannot
// run one).
func waitZygote(t *testing.T, pool *Pool) {
	t.Helper()
	awaitZygote(pool)
	pool.mu.Lock()
	z, zerr := pool.zyg, pool.zygErr
	pool.mu.Unlock()
	switch {
	case z != nil:
	case zerr != nil:
		fixture.Missing(t, "no zygote: %v", zerr)
	default:
		t.Fatalf("no zygote within 10s: %+v", pool.Stats())
	}
}

// awaitZygote waits (at most 10 s) until pool's zygote runs, or the pool knows why it has none.
func awaitZygote(pool *Pool) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		pool.mu.Lock()
		done := pool.zyg != nil || pool.zygErr != nil
		pool.mu.Unlock()
		if done {
			return
		}
	}
}

// zygotePID is the pid of pool's zygote.
func zygotePID(t *testing.T, pool *Pool) int {
	t.Helper()
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.zyg == nil {
		t.Fatal("the pool has no zygote")
	}
	return pool.zyg.cmd.Process.Pid
}

// requireZygoteServed fails t unless pool's zygote served at least n calls.
func requireZygoteServed(t *testing.T, pool *Pool, n int64) {
	t.Helper()
	if s := pool.Stats(); s.Zygote < n {
		t.Fatalf("the zygote served %d calls, want %d: the attack did not reach it (%+v)", s.Zygote, n, s)
	}
}

// TestZygoteConcurrentCallsAreApart runs 8 calls at once through the zygote, whose threads share
// one descriptor table and one memory: each program starts with its standard streams and no other
// descriptor (not the zygote's, not another call's pipes, plan or cgroup files), sees only its own
// processes, and a program that kills every process it can (kill -1, its process group) and tries
// PID 1 ends nothing of the other calls.
func TestZygoteConcurrentCallsAreApart(t *testing.T) {
	pool := zygotePool(t)
	const calls = 8
	probe := `ls /proc/$$/fd; echo ---; ls -d /proc/[0-9]* | wc -l; sleep 0.5; echo alive`
	killer := `kill -KILL 1; kill -STOP 1; kill -KILL 0; kill -KILL -1; echo survived`
	var wg sync.WaitGroup
	results := make([]result, calls)
	for i := range calls {
		wg.Go(func() {
			script := probe
			if i%2 == 1 {
				script = `sleep 0.2; ` + killer
			}
			results[i] = runPooled(t, pool, sh(t, script, "/bin/ls", "/usr/bin/wc", "/bin/sleep"))
		})
	}
	wg.Wait()
	for i, r := range results {
		if i%2 == 1 {
			if strings.Contains(r.stdout, "survived") {
				t.Errorf("call %d: kill -1 left the killer alive: %q", i, r.stdout)
			}
			continue
		}
		fds, rest, _ := strings.Cut(r.stdout, "---\n")
		if got := strings.Fields(fds); !slices.Equal(got, []string{"0", "1", "2"}) {
			t.Errorf("call %d: the program has descriptors %v, want only 0 1 2", i, got)
		}
		// PID 1, the shell, ls and wc at most: nothing of the host or of another call.
		if n, _, _ := strings.Cut(rest, "\n"); strings.TrimSpace(n) > "4" || !strings.Contains(rest, "alive") || r.code != 0 {
			t.Errorf("call %d: exit %d, %s processes seen, stdout %q: a neighbour's kill reached it or it saw others", i, r.code, n, r.stdout)
		}
	}
	requireZygoteServed(t, pool, calls)
}

// TestZygotePID1IsOutOfReach: a call's PID 1 is a clone of the root zygote sharing its memory. The
// program reads its command line (the zygote's, as an init's was) and nothing else of it: not its
// environment, memory map, memory, descriptors or stack; PID 1 has no capability and
// no_new_privs, and no signal from the sandbox stops or kills it. The program's core size is 0.
// (PID 1 keeps uid 0; from an unprivileged host that is uid 0 of the zygote's user namespace, as
// the program's: its lack of capabilities and dumpability keep the program out. The program owns
// PID 1's /proc files there, so it may list the numbers of PID 1's descriptors, not what they are.)
func TestZygotePID1IsOutOfReach(t *testing.T) {
	pool := zygotePool(t)
	script := `for f in environ maps mem stack syscall auxv pagemap; do
	  if cat /proc/1/$f >/dev/null 2>&1; then echo "read $f"; fi
	done
	if ls /proc/1/fd/ >/dev/null 2>&1; then echo "listed fd"; fi
	for l in /proc/1/fd/*; do if readlink "$l" >/dev/null 2>&1; then echo "read link $l"; fi; done
	if cat /proc/1/fdinfo/* >/dev/null 2>&1; then echo "read fdinfo"; fi
	if echo x > /proc/1/mem 2>/dev/null; then echo "wrote mem"; fi
	if echo 1000 > /proc/1/oom_score_adj 2>/dev/null; then echo "wrote oom_score_adj"; fi
	grep -E '^(Uid|Gid|Cap(Prm|Eff|Amb|Inh)|NoNewPrivs):' /proc/1/status | tr -s '\t ' ' '
	kill -STOP 1; kill -KILL 1; sleep 0.2
	grep '^State:' /proc/1/status | tr -s '\t ' ' '
	echo core $(ulimit -c)`
	r := runPooled(t, pool, sh(t, script, "/bin/cat", "/bin/ls", "/bin/grep", "/usr/bin/tr", "/bin/sleep", "/bin/readlink"))
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	bads := []string{"read ", "wrote "}
	if os.Geteuid() == 0 {
		bads = append(bads, "listed ")
	}
	for _, bad := range bads {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("the program reached PID 1 (the zygote's memory): %q", r.stdout)
		}
	}
	// uid 0 (of the zygote's user namespace on an unprivileged host) without any capability: no
	// process of another uid may signal it (TestR12CallsPID1IsNotSignalableByNobody).
	for _, want := range []string{"Uid: 0 0 0 0", "Gid: 0 0 0 0", "CapPrm: 0000000000000000",
		"CapEff: 0000000000000000", "CapAmb: 0000000000000000", "NoNewPrivs: 1", "State: S (", "core 0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q in the program's view of PID 1 and itself:\n%s", want, r.stdout)
		}
	}
	requireZygoteServed(t, pool, 1)
}

const zygoteParentEnv = "NSINIT_TEST_ZYGOTE_PARENT"

// TestZygoteSandboxDiesWithTheHost starts, in a copy of this test binary, a pool whose zygote runs
// sleep, and SIGKILLs that host: within a second neither the zygote, PID 1 nor the sleeper is left.
func TestZygoteSandboxDiesWithTheHost(t *testing.T) {
	if token := os.Getenv(zygoteParentEnv); token != "" {
		zygoteParentChild(t, token)
		return
	}
	requireRoot(t)
	token := sleepToken(t)
	parent, line, err := fixture.Rerun(t, []string{zygoteParentEnv + "=" + token})
	var zygote, pid1 int
	if _, perr := fmt.Sscanf(line, "zygote %d pid1 %d", &zygote, &pid1); err != nil || perr != nil {
		if strings.HasPrefix(line, "skip") {
			fixture.Missing(t, "%s", line) // under CI=true, a failure: the zygote must run there
		}
		t.Fatalf("the host said %q: %v %v", line, err, perr)
	}
	sleeper := waitSleeper(t, token)
	pids := []int{zygote, pid1, sleeper}
	was := []string{cmdline(zygote), cmdline(pid1), cmdline(sleeper)}
	if !strings.HasPrefix(was[0], procName+" "+zygoteMarker) || was[1] != was[0] {
		t.Fatalf("pids %d and %d run %q and %q, not the zygote and its PID 1", zygote, pid1, was[0], was[1])
	}
	t.Logf("zygote %d, PID 1 %d, sleeper %d", zygote, pid1, sleeper)
	if err := parent.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	requireGone(t, token, pids, was)
}

// zygoteParentChild is TestZygoteSandboxDiesWithTheHost's host: it runs the sleeper through its
// pool's zygote, prints the zygote's and PID 1's pids and waits to be killed.
func zygoteParentChild(t *testing.T, token string) {
	pool := NewPool(PoolConfig{Max: 1})
	defer pool.Close()
	var z *zygote
	for deadline := time.Now().Add(10 * time.Second); z == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		pool.mu.Lock()
		z = pool.zyg
		pool.mu.Unlock()
	}
	if z == nil {
		fmt.Printf("skip: no zygote: %+v\n", pool.Stats())
		return
	}
	cmd, _ := takeReady(t, pool, sleeperPlan(t, token), false)
	fmt.Printf("zygote %d pid1 %d\n", z.cmd.Process.Pid, cmd.Process.Pid)
	<-cmd.Ended()
	t.Fatalf("the sandbox ended before its host was killed: %v", cmd.Failure())
}

// TestZygoteFailuresLeaveNothing sends the zygote plans that fail at every stage it can reach (a
// path that does not resolve, a directory the program cannot enter, a program that is not there)
// and checks that it holds as many descriptors and children (ready threads' PID 1s) afterwards as
// before: a failed call leaves no PID 1, thread or descriptor behind.
func TestZygoteFailuresLeaveNothing(t *testing.T) {
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	runPooled(t, pool, plan(t, "/bin/true", nil))
	fdsBefore, kidsBefore := zygoteBaseline(t, zpid)
	base := workTree(t, "/var/tmp")
	link := filepath.Join(base, "link")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(base, "script") // its interpreter is not there: the exec fails
	if err := fixture.WriteFile(script, []byte("#!/nonexistent/clihost-attack\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := []func(p *isolation.Plan){
		func(p *isolation.Plan) { p.ReadWrite = append(p.ReadWrite, link) },
		func(p *isolation.Plan) { p.Dir = "/root" },
		func(p *isolation.Plan) { p.Path, p.Args, p.Exec = script, []string{"x"}, append(p.Exec, script) },
	}
	for range 3 {
		for i, mod := range bad {
			p := plan(t, "/bin/true", nil)
			mod(&p)
			if r := runPooled(t, pool, p); r.code == 0 && r.failure == nil {
				t.Fatalf("bad plan %d ran: %+v", i, r)
			}
		}
	}
	requireZygoteServed(t, pool, 1+3*int64(len(bad)))
	zygoteBackTo(t, pool, zpid, fdsBefore, kidsBefore, 5*time.Second, "failed calls")
}

// zygoteBaseline is what the zygote (pid) holds with its ready threads, each with its PID 1: the
// most zygoteSteady sees over half a second (a thread that is making itself ready holds a few
// descriptors more for a moment).
func zygoteBaseline(t *testing.T, pid int) (fds, kids []string) {
	t.Helper()
	for range 10 {
		if f, k := zygoteSteady(t, pid); len(f) > len(fds) {
			fds, kids = f, k
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fds, kids
}

// zygoteBackTo waits, at most within, until the zygote (pid, pool's) holds no more descriptors and
// children than it did before (fdsBefore, kidsBefore: zygoteSteady's), and fails t saying after
// what it does not. A sandbox built ahead for a next call is no leak: pool's are let go first.
func zygoteBackTo(t *testing.T, pool *Pool, pid int, fdsBefore, kidsBefore []string, within time.Duration, after string) {
	t.Helper()
	time.Sleep(5 * aheadPause)
	if z := pool.zygote(); z != nil {
		z.closeAhead()
	}
	var fds, kids []string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if fds, kids = zygoteSteady(t, pid); len(fds) <= len(fdsBefore) && len(kids) <= len(kidsBefore) {
			return
		}
	}
	t.Errorf("after %s the zygote holds descriptors %v and children %v, before %v and %v", after, fds, kids, fdsBefore, kidsBefore)
}

// threadsShowing lists the threads of process pid whose mount table has a mount at mnt.
func threadsShowing(pid int, mnt string) []string {
	var out []string
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, _ := os.ReadDir(dir)
	for _, task := range tasks {
		b, err := os.ReadFile(dir + task.Name() + "/mountinfo")
		if err == nil && strings.Contains(string(b), " "+mnt+" ") {
			out = append(out, task.Name())
		}
	}
	return out
}

// zygoteSteady is zygoteHoldings once the zygote has all its ready threads (zygoteWarm PID 1s as
// its children), or after 5 s: a thread that took a call is replaced in the background.
func zygoteSteady(t *testing.T, pid int) (fds, kids []string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fds, kids = zygoteHoldings(t, pid); len(kids) == zygoteWarm || time.Now().After(deadline) {
			return fds, kids
		}
	}
}

// zygoteHoldings lists the zygote's open descriptors (number -> target) and its children.
func zygoteHoldings(t *testing.T, pid int) (fds, kids []string) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid)
	entries, err := os.ReadDir(dir + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		target, _ := os.Readlink(dir + "/fd/" + e.Name())
		fds = append(fds, e.Name()+"->"+target)
	}
	tasks, _ := os.ReadDir(dir + "/task")
	for _, task := range tasks {
		data, _ := os.ReadFile(dir + "/task/" + task.Name() + "/children")
		kids = append(kids, strings.Fields(string(data))...)
	}
	return fds, kids
}

// TestZygotePID1HoldsOnlyItsOwn: PID 1 is cloned from a zygote thread while other calls' threads
// hold their plans, pipes and cgroup files in the shared descriptor table; it keeps its control
// pipe and its signalfd and nothing else (no standard stream either), however many calls run.
func TestZygotePID1HoldsOnlyItsOwn(t *testing.T) {
	pool := zygotePool(t)
	token := sleepToken(t)
	var cmds []*Cmd
	t.Cleanup(func() { requireGone(t, token, nil, nil) }) // after every call's own cleanup
	for range 4 {
		cmd, stdio := takeReady(t, pool, sleeperPlan(t, token), true)
		cmds = append(cmds, cmd)
		t.Cleanup(func() {
			cmd.report.Close() // the host lets go: the zygote ends the call
			for _, f := range []*os.File{stdio.In, stdio.Out, stdio.Err} {
				f.Close()
			}
		})
	}
	for _, cmd := range cmds {
		dir := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/fd/"
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var fds []string
		for _, e := range entries {
			target, _ := os.Readlink(dir + e.Name())
			fds = append(fds, e.Name()+"->"+target)
		}
		if len(fds) != 2 || !strings.Contains(strings.Join(fds, " "), "pipe:") || !strings.Contains(strings.Join(fds, " "), "signalfd") {
			t.Errorf("PID 1 (%d) holds %v, want its control pipe and its signalfd only", cmd.Process.Pid, fds)
		}
	}
	requireZygoteServed(t, pool, 4)
}

// TestZygoteStuckExecStopsNoOtherCall: a plan's program whose exec never ends (its ELF interpreter
// is on a file system that never answers: a FUSE mount with no server; an NFS or a hostile FUSE
// server in a workspace does the same) must hold up its own call only. As many such calls as the
// zygote has CPUs run at once, and a plain call must still be served while they hang: the
// zygote's threads must not wait for an exec in a way that keeps the Go runtime from running its
// other goroutines (a vfork wait inside a raw system call holds its P, and stops the world).
func TestZygoteStuckExecStopsNoOtherCall(t *testing.T) {
	pool := zygotePool(t)
	stuck := stuckExec(t)
	var hung []*Cmd
	for range max(runtime.NumCPU(), 2) {
		p := plan(t, "/bin/true", nil)
		p.Path, p.Exec = stuck, append(p.Exec, stuck)
		p.Timeout = time.Minute // what ends them, if nothing else does
		cmd, stdio := takeReady(t, pool, p, false)
		hung = append(hung, cmd)
		t.Cleanup(func() {
			cmd.report.Close()
			stdio.Out.Close()
			stdio.Err.Close()
		})
	}
	time.Sleep(200 * time.Millisecond) // let the hung calls reach their exec
	done := make(chan result, 1)
	go func() { done <- runPooled(t, pool, plan(t, "/bin/true", nil)) }()
	select {
	case r := <-done:
		if r.code != 0 || r.failure != nil {
			t.Fatalf("the plain call: exit %d, failure %v", r.code, r.failure)
		}
	case <-time.After(30 * time.Second): // a bound, not a measurement: it takes milliseconds
		t.Fatalf("the plain call was not served within 30s while %d execs hang: %+v", len(hung), pool.Stats())
	}
	for i, cmd := range hung {
		select {
		case <-cmd.Ended():
			t.Errorf("stuck call %d ended (%v): it did not hang in its exec, the attack proves nothing", i, cmd.Failure())
		default:
		}
	}
	requireZygoteServed(t, pool, int64(len(hung))+1)
}

// stuckExec returns a copy of /bin/true whose ELF interpreter is on a FUSE mount that no server
// answers: its exec waits in the kernel (killably) until the connection is aborted at cleanup.
func stuckExec(t *testing.T) string {
	t.Helper()
	fuse, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fixture.Missing(t, "no FUSE: %v", err)
	}
	t.Cleanup(func() { unix.Close(fuse) }) // aborts the connection: every waiter gets ENOTCONN
	base := workTree(t, "/var/tmp")
	mnt, err := os.MkdirTemp("/var/tmp", "zf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(mnt) })
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fuse)
	if err := unix.Mount("clihost-attack", mnt, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		fixture.Missing(t, "cannot mount FUSE: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	interp := interpreter(t, "/bin/true")
	stuck := mnt + "/l"
	if interp == "" || len(stuck) > len(interp) {
		t.Skipf("cannot patch /bin/true's interpreter %q with %q", interp, stuck)
	}
	data, err := os.ReadFile(realPath("/bin/true"))
	if err != nil {
		t.Fatal(err)
	}
	patched := bytes.Replace(data, []byte(interp+"\x00"), append([]byte(stuck), make([]byte, len(interp)-len(stuck)+1)...), 1)
	exe := filepath.Join(base, "stuck")
	if err := fixture.WriteFile(exe, patched, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestZygoteSeesTheHostsMountsNow: the zygote's ready threads hold copies of the host's mount
// table made before their call. A file system mounted on the host, and then made read-only, after
// the zygote started must be what the call sees, as with an init started for it: its threads must
// compare their copies with the host's table, not with one of the zygote's own threads' (the main
// thread may be left in a namespace of its own by the goroutine it ran).
func TestZygoteSeesTheHostsMountsNow(t *testing.T) {
	pool := zygotePool(t)
	runPooled(t, pool, plan(t, "/bin/true", nil)) // the zygote has served, its threads are ready
	mnt := filepath.Join(workTree(t, "/var/tmp"), "mnt")
	fixture.WriteIn(t, mnt, map[string]string{"which": "underneath\n"})
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0777"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(mnt, "which"), []byte("the new mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, "size=1m,mode=0777"); err != nil {
		t.Fatal(err)
	}
	p := sh(t, "cat "+filepath.Join(mnt, "which")+"; echo x > "+filepath.Join(mnt, "written"), "/bin/cat")
	p.ReadWrite = append(p.ReadWrite, mnt)
	r := runPooled(t, pool, p)
	if !strings.HasPrefix(r.stdout, "the new mount\n") {
		t.Errorf("the call read %q: the zygote served it from a copy of the mount table older than the mount", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(mnt, "written")); err == nil || r.code == 0 {
		t.Errorf("exit %d: the call wrote into a file system the host had made read-only", r.code)
	}
	requireZygoteServed(t, pool, 2)
}

// TestZygoteDeadlineEndsTheSandbox: a call whose plan has a Timeout ends when it passes, with
// nothing left of it, although the host never stops it (the zygote's watch kills PID 1).
func TestZygoteDeadlineEndsTheSandbox(t *testing.T) {
	pool := zygotePool(t)
	token := sleepToken(t)
	p := sleeperPlan(t, token)
	p.Timeout = time.Second
	cmd, stdio := takeReady(t, pool, p, false)
	sleeper := waitSleeper(t, token)
	was := cmdline(sleeper)
	r := finishPooled(t, cmd, stdio)
	if r.code != exitKilled {
		t.Errorf("exit %d, want %d (killed at the deadline)", r.code, exitKilled)
	}
	requireGone(t, token, []int{sleeper}, []string{was})
	requireZygoteServed(t, pool, 1)
}

// rootlessZygoteEnv marks the copy of the test binary TestZygoteRootless runs as nobody.
const rootlessZygoteEnv = "NSINIT_TEST_ROOTLESS_ZYGOTE"

// TestZygoteRootless runs the zygote's tests again from an unprivileged host (a copy of this test
// binary run as nobody, as the shipped unit's daemon runs as its own user): the zygote then runs
// in a user namespace of its own, and each attack must meet the same walls.
func TestZygoteRootless(t *testing.T) {
	if os.Getenv(rootlessZygoteEnv) == "1" {
		t.Skip("this is the rootless run")
	}
	requireRoot(t)
	if testPool != nil {
		t.Skip("this is a pooled run")
	}
	// Not the tests that mount on the host (a FUSE server, a tmpfs made after the threads were
	// ready or after a sandbox was built ahead, a read-only /proc/sys), which nobody cannot, nor
	// those about control groups, which nobody has none of here; nor the suite's runs.
	rerunAsNobody(t, rootlessZygoteEnv, "-test.run=^TestZygote",
		"-test.skip=^TestZygote(RunsTheSuite|Rootless|SeesTheHostsMountsNow|SeesMountsMadeAfterItPrepared|EgressOnAFreshThread|StuckExecStopsNoOtherCall|ThreadStuckOnAPlanPath|StuckThreadsDoNotHoldThePool|KilledWhileEgressThreadHangs|UnderReadOnlyProcSys|SlotsCarryTheLastLimits|FreshThreadHasNoCapabilities|InterleavedLimitsHold|IdleThreadsLetGoOfUnmountedFileSystems|AheadSandboxSeesMountsMadeSince|AheadSandboxLetsGoOfUnmountedFileSystems|AheadCallKeepsItsOwnGroupLimits)$")
}

// readOnlyProcSysEnv marks the copy of the test binary TestZygoteUnderReadOnlyProcSys runs in a
// mount namespace whose /proc/sys is read-only.
const readOnlyProcSysEnv = "NSINIT_TEST_RO_PROCSYS"

// TestZygoteUnderReadOnlyProcSys: a root host whose /proc/sys is read-only (systemd's
// ProtectKernelTunables= bind-mounts it so) still gets the zygote, and its sandboxes still have
// vm.memfd_noexec=2: PID 1 sets it through the fresh /proc it mounts for the call, which the
// host's read-only one does not cover. The host's own stays read-only and unchanged.
func TestZygoteUnderReadOnlyProcSys(t *testing.T) {
	if os.Getenv(readOnlyProcSysEnv) == "1" {
		if err := unix.Access("/proc/sys/vm/memfd_noexec", unix.W_OK); !errors.Is(err, unix.EROFS) {
			t.Fatalf("the host's /proc/sys is not read-only here: %v", err)
		}
		host, err := os.ReadFile("/proc/sys/vm/memfd_noexec")
		if err != nil {
			t.Fatal(err)
		}
		pool := zygotePool(t)
		p := plan(t, "/bin/cat", []string{"/proc/sys/vm/memfd_noexec"})
		p.NoExecMemfd, p.Seccomp = true, true
		if r := runPooled(t, pool, p); r.code != 0 || r.stdout != "2\n" {
			t.Fatalf("vm.memfd_noexec in the sandbox: exit %d, %q, stderr %q; want 2", r.code, r.stdout, r.stderr)
		}
		requireZygoteServed(t, pool, 1)
		if after, err := os.ReadFile("/proc/sys/vm/memfd_noexec"); err != nil || !bytes.Equal(after, host) {
			t.Fatalf("the host's vm.memfd_noexec changed from %q to %q (%v)", host, after, err)
		}
		return
	}
	requireRoot(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := "mount --make-rprivate / && mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && exec \"$0\" -test.run='^" + t.Name() + "$' -test.v"
	cmd := exec.Command("/bin/sh", "-c", script, exe)
	cmd.Env = append(os.Environ(), readOnlyProcSysEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
}
