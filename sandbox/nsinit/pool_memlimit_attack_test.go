package nsinit

import (
	"testing"
	"time"

	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/cgroup"
)

// TestPoolTinyMemoryLimitKeepsThePool: on cgroup v2 a pooled init waits in its slot group, its
// own memory (the Go runtime: a few MiB) charged to it; Take writes the call's memory.max into that
// group. A limit below what the init already uses (runner.limits.memory_mb may be as low as 1, and
// a bundle or tool sets it) makes the kernel OOM-kill the waiting init during the write; the plan's
// write then fails, and Take discards the init, counts a failure and tries the next ready one:
// every ready init is killed in turn and, after three, the pool stops for a minute. One such call a
// minute keeps the pool off for every bundle, like the oversized plans of the first review. The
// limit is the call's fault: the call should get one init (or start cold) and fail alone, without
// emptying and pausing the pool. Suggested fix: do not count (nor retry with another init) a give
// that failed after the call's limits were applied, or refuse in Take a memory limit below what a
// waiting init holds (memory.current of its slot) and start that call cold.
//
// Only on a host whose memory controller is cgroup v2 (on v1 a pooled init joins its groups only
// with its plan, so the limit is written into an empty group).
func TestPoolTinyMemoryLimitKeepsThePool(t *testing.T) {
	pool := newTestPool(t)
	if cgroup.Default().Mechanism(cgroup.Memory) != cgroup.V2 {
		t.Skip("the memory controller is not cgroup v2 here: a pooled init's groups are empty until its plan")
	}
	waitReady(t, pool)
	before := pool.Stats()
	p := plan(t, "/bin/true", nil)
	p.Limits = isolation.Limits{MemoryBytes: 1 << 20}
	for range 3 {
		cmd, stdio, err := pool.Take(p, false, nil)
		if err == nil && cmd != nil {
			finishPooled(t, cmd, stdio)
		}
	}
	time.Sleep(2 * time.Second)
	after := pool.Stats()
	t.Logf("before %+v after %+v", before, after)
	if after.Discarded > before.Discarded || after.Ready == 0 {
		t.Errorf("calls with a 1 MiB memory limit discarded %d ready inits and left %d ready (stats %+v): the pool stopped for everyone",
			after.Discarded-before.Discarded, after.Ready, after)
	}
}
