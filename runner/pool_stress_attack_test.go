package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox/nsinit"
)

func fdCount(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// clihostGroups lists the control group directories of this process's calls, those the pools
// hold (made ahead of calls, or kept for a caller's next call: bounded, and not a leak) excepted.
func clihostGroups(pools ...*nsinit.Pool) []string {
	var held []string
	for _, p := range pools {
		held = append(held, p.Groups()...)
	}
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup/*/clihost-*", "/sys/fs/cgroup/*/*/clihost-*", "/sys/fs/cgroup/*/*/*/clihost-*"} {
		m, _ := filepath.Glob(pat)
		out = append(out, m...)
	}
	var mine []string
	for _, g := range out {
		if strings.Contains(filepath.Base(g), fmt.Sprintf("clihost-%d-", os.Getpid())) && !slices.Contains(held, filepath.Base(g)) {
			mine = append(mine, g)
		}
	}
	return mine
}

func children() int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+2:])
		if len(f) > 1 && f[1] == fmt.Sprint(os.Getpid()) {
			n++
		}
	}
	return n
}

// TestPoolStressNoLeak runs batches of concurrent sandboxed calls, pooled (and some cold: tty
// excluded here), mixing quick exits, timeouts with SIGTERM ignored, stdin, background writers
// and cgroup limits, and checks that descriptors, goroutines, children and cgroup directories
// return to where they were.
func TestPoolStressNoLeak(t *testing.T) {
	requireSandbox(t)
	pool := nsinit.NewPool(nsinit.PoolConfig{Max: 8})
	defer pool.Close()
	kinds := []string{"quick", "timeout", "stdin", "bg", "limits", "exit137", "cold"}
	batch := func() {
		var wg sync.WaitGroup
		for i := range 35 {
			kind := kinds[i%len(kinds)]
			wg.Go(func() {
				var c runner.Command
				switch kind {
				case "quick":
					c = sh(t, "echo ok")
				case "timeout":
					c = sh(t, "trap '' TERM; while :; do :; done")
					c.Timeout, c.Grace = 300*time.Millisecond, 100*time.Millisecond
				case "stdin":
					c = sh(t, "read x; echo got $x")
					c.Stdin = []byte("hello\n")
				case "bg":
					c = sh(t, "( trap '' TERM; while :; do :; done ) & echo bg")
				case "limits":
					c = sh(t, "echo lim")
				case "exit137":
					c = sh(t, "kill -9 $$")
				case "cold":
					c = sh(t, "echo cold")
				}
				c.Dir = "/"
				c.Sandbox = sandboxPlan()
				if kind == "limits" {
					c.Sandbox.Limits = isolation.Limits{Pids: 64, MemoryBytes: 256 << 20}
				}
				if kind != "cold" {
					c.Pool = pool
				}
				res, err := runner.Run(context.Background(), c)
				if err != nil {
					t.Errorf("%s: %v", kind, err)
					return
				}
				switch kind {
				case "timeout":
					if !res.TimedOut {
						t.Errorf("%s: %+v", kind, res)
					}
				case "exit137":
					if res.ExitCode != 137 {
						t.Errorf("%s: exit %d sig %q", kind, res.ExitCode, res.Signal)
					}
				case "stdin":
					if string(res.Stdout) != "got hello\n" {
						t.Errorf("%s: %q %q", kind, res.Stdout, res.Stderr)
					}
				default:
					if res.ExitCode != 0 {
						t.Errorf("%s: exit %d %q %q", kind, res.ExitCode, res.Stdout, res.Stderr)
					}
				}
			})
		}
		wg.Wait()
	}
	batch() // warm up
	time.Sleep(3 * time.Second)
	fds0, gr0, ch0, cg0 := fdCount(t), runtime.NumGoroutine(), children(), len(clihostGroups(pool))
	for range 4 {
		batch()
	}
	var fds, gr, ch, cg int
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		fds, gr, ch, cg = fdCount(t), runtime.NumGoroutine(), children(), len(clihostGroups(pool))
		if fds <= fds0+2 && gr <= gr0+3 && ch <= ch0+1 && cg <= cg0+1 {
			break
		}
	}
	t.Logf("fds %d->%d goroutines %d->%d children %d->%d groups %d->%d stats %+v", fds0, fds, gr0, gr, ch0, ch, cg0, cg, pool.Stats())
	if fds > fds0+2 || gr > gr0+3 || ch > ch0+1 || cg > cg0+1 {
		t.Errorf("leak: fds %d->%d goroutines %d->%d children %d->%d groups %d->%d (%v)", fds0, fds, gr0, gr, ch0, ch, cg0, cg, clihostGroups(pool))
	}
	// What the pool holds is bounded (inits ready, groups made ahead, groups kept for a caller's
	// next call), and gone once it is closed.
	held := pool.Groups()
	if len(held) > 8+2+8 {
		t.Errorf("the pool holds %d control groups: %v", len(held), held)
	}
	pool.Close()
	for _, g := range held {
		if left := clihostGroups(); slices.ContainsFunc(left, func(p string) bool { return filepath.Base(p) == g }) {
			t.Errorf("the pool's group %s outlived it", g)
		}
	}
}
