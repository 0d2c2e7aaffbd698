package nsinit

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// poolEnv, set to 1, makes this test binary run every sandbox of run() through a Pool's inits;
// set to zygoteMode, through a Pool's zygote where it serves the plan.
const poolEnv = "NSINIT_TEST_POOL"

// zygoteMode is the value of poolEnv for a run through the zygote.
const zygoteMode = "zygote"

// testPool is the pool run() takes inits from when poolEnv is set.
var testPool *Pool

// takeReady takes an init from pool for p, waiting (at most 10 s) until one is ready: these tests
// are about pooled inits, so a call that would start cold is not what they check.
func takeReady(t testing.TB, pool *Pool, p isolation.Plan, stdin bool) (*Cmd, *Stdio) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		cmd, stdio, err := pool.Take(p, stdin, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cmd != nil {
			return cmd, stdio
		}
	}
	t.Fatalf("no pooled init was ready within 10s (stats %+v)", pool.Stats())
	return nil, nil
}

// runPooled runs p in an init taken from pool, with no input, and returns its output and status.
func runPooled(t testing.TB, pool *Pool, p isolation.Plan) result {
	t.Helper()
	cmd, stdio := takeReady(t, pool, p, false)
	r := finishPooled(t, cmd, stdio)
	t.Logf("pooled: exit %d, failure %v\nstdout: %s\nstderr: %s", r.code, r.failure, r.stdout, r.stderr)
	return r
}

// readStreams reads a call's standard output and error in the background, closing each at its
// end; wait returns them once both reached their end.
func readStreams(stdio *Stdio) (wait func() (stdout, stderr string)) {
	var out, errb bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(&out, stdio.Out); stdio.Out.Close() })
	wg.Go(func() { _, _ = io.Copy(&errb, stdio.Err); stdio.Err.Close() })
	return func() (string, string) {
		wg.Wait()
		return out.String(), errb.String()
	}
}

// finishPooled reads a pooled init's output to its end, waits for it and returns its result: the
// status it reported, as the runner takes it (a sandbox from the zygote cannot be waited for: its
// PID 1 is the zygote's child), or the one it exited with.
func finishPooled(t testing.TB, cmd *Cmd, stdio *Stdio) result {
	t.Helper()
	output := readStreams(stdio)
	<-cmd.Ended()
	if status, ok := cmd.Reported(); ok {
		stdout, stderr := output()
		r := result{stdout, stderr, status, cmd.Failure()}
		cmd.Finish(func(err error) { t.Error(err) })
		return r
	}
	err := cmd.Wait()
	stdout, stderr := output()
	r := finished(t, cmd, err, bytes.NewBufferString(stdout), bytes.NewBufferString(stderr))
	if err := cmd.Release(); err != nil {
		t.Error(err)
	}
	return r
}

// TestPoolRunsTheSuite runs this package's tests again with every run() through a Pool: the
// pooled init builds the same sandbox as one started for its call (files, masks, Landlock,
// identity, namespaces, failures, rootless), only earlier.
func TestPoolRunsTheSuite(t *testing.T) { runSuite(t, "1") }

// TestZygoteRunsTheSuite runs this package's tests again with every run() through a Pool whose
// zygote serves every plan it can (a root host's, without ingress): the zygote builds
// the same sandbox as an init.
func TestZygoteRunsTheSuite(t *testing.T) { runSuite(t, zygoteMode) }

// runSuite runs this test binary again, without the pool's own tests, with poolEnv set to mode
// (it is skipped in such a run).
func runSuite(t *testing.T, mode string) {
	t.Helper()
	requireRoot(t)
	if testPool != nil {
		t.Skip("this is a pooled run")
	}
	fixture.Slow(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.count=1", "-test.skip=^Test(Pool|Zygote)")
	cmd.Env = append(os.Environ(), poolEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the suite failed through the pool (%s): %v\n%s", mode, err, out)
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatalf("no PASS in the pooled run (%s):\n%s", mode, out)
	}
	i := strings.LastIndex(string(out), "pool: ")
	if i < 0 {
		t.Fatalf("the pooled run (%s) did not say what served its calls:\n%s", mode, out)
	}
	line, _, _ := strings.Cut(string(out[i:]), "\n")
	var inits, zygote int
	if _, err := fmt.Sscanf(line, "pool: %d calls from inits, %d from the zygote", &inits, &zygote); err != nil {
		t.Fatalf("the pooled run's (%s) line %q: %v", mode, line, err)
	}
	t.Log(line)
	if mode == zygoteMode && zygote < 30 || mode != zygoteMode && (zygote != 0 || inits < 30) {
		t.Fatalf("the pooled run (%s): %s", mode, line)
	}
}

// newTestPool is a pool for one test, closed with it.
func newTestPool(t *testing.T) *Pool { return newPoolFor(t, PoolConfig{Max: 2}) }

// newInitPool is a pool for one test whose calls are all served by its inits (no zygote): for the
// tests about the inits themselves.
func newInitPool(t *testing.T) *Pool { return newPoolFor(t, PoolConfig{Max: 2, NoZygote: true}) }

// newPoolFor is a pool with cfg for one test, closed with it.
func newPoolFor(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	requireRoot(t)
	if err := Check(); err != nil {
		fixture.Missing(t, "the sandbox is unavailable: %v", err)
	}
	pool := NewPool(cfg)
	t.Cleanup(func() {
		pool.Close()
		// A call's groups are kept or removed in the background (Finish): not past its test.
		if !WaitFinished(10 * time.Second) {
			t.Error("the calls' groups were not removed within 10s")
		}
	})
	return pool
}

// waitReady waits (at most 10 s) until pool has an init ready.
func waitReady(t *testing.T, pool *Pool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if pool.Stats().Ready > 0 {
			return
		}
	}
	t.Fatalf("the pool has no init ready after 10s: %+v", pool.Stats())
}

// TestPoolSeesMountsMadeAfterItStarted: a pooled init's mount namespace is a copy made when it
// started. A file system mounted on the host after that must be what the call sees, not the
// directory underneath: the pool notices the change of the mount table and discards its inits.
func TestPoolSeesMountsMadeAfterItStarted(t *testing.T) {
	pool := newTestPool(t)
	base := workTree(t, "/var/tmp")
	mnt := filepath.Join(base, "mnt")
	fixture.WriteIn(t, mnt, map[string]string{"which": "underneath\n"})
	waitReady(t, pool)
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(mnt, "which"), []byte("the new mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := pool.Stats().Discarded
	p := plan(t, "/bin/cat", []string{filepath.Join(mnt, "which")})
	p.ReadOnly = append(p.ReadOnly, mnt)
	r := runPooled(t, pool, p)
	t.Logf("stats %+v", pool.Stats())
	if r.code != 0 || r.stdout != "the new mount\n" {
		t.Fatalf("exit %d, stdout %q; want the file of the mount made after the pool started", r.code, r.stdout)
	}
	// A call the zygote served took no init: its threads' copies are the ones that were renewed.
	if s := pool.Stats(); s.Zygote == 0 && s.Discarded <= before {
		t.Errorf("no init was discarded after the mount table changed: %+v", s)
	}
}

// TestPoolInitsServeOneCallEach: every call gets an init of its own (a new PID 1), and the pool
// refills behind it.
func TestPoolInitsServeOneCallEach(t *testing.T) {
	pool := newInitPool(t)
	seen := map[int]bool{}
	p := plan(t, "/bin/true", nil)
	for range 4 {
		cmd, stdio := takeReady(t, pool, p, false)
		pid := cmd.Process.Pid
		if seen[pid] {
			t.Fatalf("init %d served two calls", pid)
		}
		seen[pid] = true
		if r := finishPooled(t, cmd, stdio); r.code != 0 || r.failure != nil {
			t.Fatalf("exit %d, failure %v, stderr %q", r.code, r.failure, r.stderr)
		}
	}
	if s := pool.Stats(); s.Hits != 4 || s.Started < 4 {
		t.Errorf("stats %+v: want 4 hits and at least 4 inits started", s)
	}
}

// TestPoolStdin: with input, the program reads it from the pipe; without, its standard input is
// the sandbox's /dev/null, as for an init started for its call.
func TestPoolStdin(t *testing.T) {
	pool := newTestPool(t)
	cmd, stdio := takeReady(t, pool, plan(t, "/bin/cat", nil), true)
	if _, err := stdio.In.Write([]byte("piped input\n")); err != nil {
		t.Fatal(err)
	}
	stdio.In.Close()
	if r := finishPooled(t, cmd, stdio); r.code != 0 || r.stdout != "piped input\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r := runPooled(t, pool, plan(t, "/usr/bin/readlink", []string{"/proc/self/fd/0"}))
	if r.code != 0 || r.stdout != "/dev/null\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want /dev/null", r.code, r.stdout, r.stderr)
	}
}

// TestPoolDiscardsDeadAndReplacedInits: an init that died while waiting, and one started from an
// executable that is no longer the one UseHelper names, never serve a call.
func TestPoolDiscardsDeadAndReplacedInits(t *testing.T) {
	pool := newTestPool(t)
	p := plan(t, "/bin/true", nil)
	waitReady(t, pool)
	pool.mu.Lock()
	victim := pool.idle[0].cmd.Process.Pid
	pool.mu.Unlock()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo // dead, not yet reaped: what the pool must notice
	if err := unix.Waitid(unix.P_PID, victim, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	cmd, stdio := takeReady(t, pool, p, false)
	if cmd.Process.Pid == victim {
		t.Fatal("the killed init was handed a call")
	}
	if r := finishPooled(t, cmd, stdio); r.code != 0 || r.failure != nil {
		t.Fatalf("exit %d, failure %v", r.code, r.failure)
	}

	// Another executable: a copy of this test binary, which runs Main first.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other-init")
	if err := fixture.WriteFile(other, data, 0o755); err != nil {
		t.Fatal(err)
	}
	old := executable()
	waitReady(t, pool)
	if err := UseHelper(other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		helper.Lock()
		helper.path, helper.decided = "", false
		if old != selfExe {
			helper.path, helper.decided = old, true
		}
		helper.Unlock()
	})
	cmd, stdio = takeReady(t, pool, p, false)
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
	if err != nil || exe != other {
		t.Errorf("the init runs %q (%v), want %s", exe, err, other)
	}
	if r := finishPooled(t, cmd, stdio); r.code != 0 || r.failure != nil {
		t.Fatalf("exit %d, failure %v", r.code, r.failure)
	}
}

// TestPoolClosedKillsItsInits: Close leaves no init behind.
func TestPoolClosedKillsItsInits(t *testing.T) {
	pool := newTestPool(t)
	waitReady(t, pool)
	pool.mu.Lock()
	pid := pool.idle[0].cmd.Process.Pid
	pool.mu.Unlock()
	pool.Close()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("init %d is still there after Close", pid)
	}
	if cmd, _, err := pool.Take(plan(t, "/bin/true", nil), false, nil); cmd != nil || err != nil {
		t.Errorf("Take after Close: %v, %v; want nothing (start cold)", cmd, err)
	}
}
