package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// Review 16: a zygote call's control group used again by its caller's next call (1d3561c), seen
// through runner.Run, which decides how a call ends (timeout, cancellation, the CPU watch).

// review16Pool is a pool whose zygote runs.
func review16Pool(t *testing.T) *nsinit.Pool {
	t.Helper()
	if !zygoteBuild {
		t.Skip("no zygote in this build (the race detector, or not amd64); the test runs without -race")
	}
	requireSandbox(t)
	pool := nsinit.NewPool(nsinit.PoolConfig{Max: 2})
	t.Cleanup(pool.Close)
	for deadline := time.Now().Add(10 * time.Second); !pool.Stats().ZygoteUp; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			fixture.Missing(t, "no zygote: %s", pool.Stats().ZygoteErr)
		}
	}
	return pool
}

// review16Run runs script sandboxed through pool as caller key with limits l, and waits until its
// sandbox's group was kept or removed (Finish, in the background).
func review16Run(t *testing.T, ctx context.Context, pool *nsinit.Pool, key string, l isolation.Limits, timeout time.Duration, script string) runner.Result {
	t.Helper()
	c := sh(t, script)
	c.Dir = "/"
	c.Sandbox = sandboxPlan()
	for _, exe := range []string{"/bin/sleep", "/usr/bin/setsid"} {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			c.Sandbox.Exec = append(c.Sandbox.Exec, r)
		}
	}
	c.Sandbox.NetworkKey, c.Sandbox.Limits = key, l
	c.Pool = pool
	if timeout > 0 {
		c.Timeout, c.Grace = timeout, 100*time.Millisecond
	}
	res, err := runner.Run(ctx, c)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	if !runner.Cleanup(10 * time.Second) {
		t.Fatal("the calls' sandboxes did not finish")
	}
	t.Logf("%s: exit %d signal %q timed out %t cancelled %t exhausted %q; stats %+v", key, res.ExitCode, res.Signal, res.TimedOut, res.Canceled, res.Exhausted, pool.Stats())
	return res
}

// review16HeldGroupsEmpty fails t when a control group the pool holds (made ahead, or kept for a
// caller's next call) has a process in it.
func review16HeldGroupsEmpty(t *testing.T, pool *nsinit.Pool) {
	t.Helper()
	for _, name := range pool.Groups() {
		for _, pat := range []string{"/sys/fs/cgroup/pids/" + name, "/sys/fs/cgroup/pids/*/" + name, "/sys/fs/cgroup/pids/*/*/" + name, "/sys/fs/cgroup/" + name, "/sys/fs/cgroup/*/" + name} {
			dirs, _ := filepath.Glob(pat)
			for _, d := range dirs {
				data, err := os.ReadFile(filepath.Join(d, "pids.current"))
				if err != nil {
					continue
				}
				if n, _ := strconv.Atoi(strings.TrimSpace(string(data))); n != 0 {
					t.Errorf("the pool holds group %s with %d processes in it", d, n)
				}
			}
		}
	}
}

// TestReview16StoppedCallsGroups: the groups of calls runner stopped.
//   - A call killed by the CPU watch is not given to the next call (its CPU time reached the
//     limit: Reuse refuses).
//   - A call stopped at its timeout or cancelled, whose program left processes in a session of
//     their own and ignored SIGTERM, ends with its whole PID namespace; its group is used again
//     (logged), and then holds no process and the next call, a fresh budget, runs clean.
func TestReview16StoppedCallsGroups(t *testing.T) {
	pool := review16Pool(t)
	reused := func() int64 { return pool.Stats().GroupsReused }

	cpu := isolation.Limits{Pids: 64, CPU: 300 * time.Millisecond}
	res := review16Run(t, context.Background(), pool, "uid:1002", cpu, 20*time.Second, `while :; do :; done`)
	if res.Exhausted == "" {
		t.Fatalf("the CPU burner was not stopped by its CPU time limit: %+v", res)
	}
	before := reused()
	res = review16Run(t, context.Background(), pool, "uid:1002", cpu, 20*time.Second, `exit 0`)
	if reused() != before {
		t.Errorf("the group of a call killed at its CPU time limit was given to the next call")
	}
	if res.ExitCode != 0 || res.Exhausted != "" {
		t.Errorf("the next call: %+v", res)
	}

	stuck := `trap '' TERM; setsid sh -c 'trap "" TERM; sleep 30' & (trap '' TERM; sleep 30) & sleep 30`
	lim := isolation.Limits{Pids: 64, MemoryBytes: 64 << 20}
	if res := review16Run(t, context.Background(), pool, "uid:1003", lim, 300*time.Millisecond, stuck); !res.TimedOut {
		t.Fatalf("not stopped at its timeout: %+v", res)
	}
	review16HeldGroupsEmpty(t, pool)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	before = reused()
	if res := review16Run(t, ctx, pool, "uid:1003", lim, 0, stuck); !res.Canceled {
		t.Fatalf("not cancelled: %+v", res)
	}
	t.Logf("the timed-out call's group was given to the cancelled call: %t", reused() > before)
	review16HeldGroupsEmpty(t, pool)
	before = reused()
	res = review16Run(t, context.Background(), pool, "uid:1003", lim, 20*time.Second, `exit 0`)
	t.Logf("the cancelled call's group was given to the next call: %t", reused() > before)
	if res.ExitCode != 0 || res.Exhausted != "" {
		t.Errorf("the next call: %+v", res)
	}
	review16HeldGroupsEmpty(t, pool)
}
