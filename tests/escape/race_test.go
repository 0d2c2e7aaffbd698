package escape

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// raceCalls is how many sandboxed calls TestRace makes while the swapper runs, and raceWorkers
// how many run at once.
const (
	raceCalls   = 2000
	raceWorkers = 4
)

// TestRace is issue 10 §2, a race between the policy check and the mounts: the race bundle may
// write only ws/sub, and while its calls start, another writer of the workspace (a concurrent
// call with a broader write grant, played here by a goroutine on the host) keeps replacing sub
// with a symbolic link to a directory outside the workspace (a stand-in for the user's home,
// writable by the agent uid as far as file modes go) and back. Each call writes a marker into
// ws/sub. A call may be refused (sandbox_unavailable: the tree changed under the check) or its
// write may fail, but no marker may ever land in the outside directory. Positive control: with the
// swapper stopped, the same call writes its marker into ws/sub.
func TestRace(t *testing.T) {
	fixture.Slow(t)
	s := newSuite(t)
	ws := fixture.Workspace(t)
	sub, parked := filepath.Join(ws, "sub"), filepath.Join(ws, "sub.parked")
	must(t, os.Mkdir(sub, 0o755))
	fixture.GiveToAgent(t, ws)
	home, err := os.MkdirTemp(outside, "home-")
	must(t, err)
	must(t, os.Chmod(home, 0o777))
	fixture.GiveToAgent(t, home)
	b, err := s.h.Bundle("race")
	must(t, err)
	var caught atomic.Int64 // refusals by the init: the tree changed after the policy check
	call := func(i int) (ok bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		input := map[string]any{"case": "write", "args": []any{filepath.Join(sub, fmt.Sprintf("marker-%d", i))}}
		env := s.h.Call(ctx, b, "run", input, host.Caller{Workspace: ws, User: "escape"}, host.CallOptions{})
		if !env.OK && strings.Contains(env.Error.Message, "after the policy check") {
			caught.Add(1)
		}
		return env.OK
	}

	// Positive control before the race: the grant works.
	if !call(-1) {
		t.Fatal("control: the race bundle's call failed without a race")
	}
	if _, err := os.Stat(filepath.Join(sub, "marker--1")); err != nil {
		t.Fatalf("control: the marker was not written into the granted directory: %v", err)
	}

	stop := make(chan struct{})
	var swaps atomic.Int64
	var swapper sync.WaitGroup
	swapper.Add(1)
	go func() {
		defer swapper.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// sub → a symbolic link to home, then back to the directory.
			if os.Rename(sub, parked) == nil {
				if os.Symlink(home, sub) == nil {
					time.Sleep(50 * time.Microsecond)
					os.Remove(sub)
				}
				os.Rename(parked, sub)
			}
			swaps.Add(1)
			time.Sleep(time.Millisecond)
		}
	}()

	var next, refused, escapes atomic.Int64
	var workers sync.WaitGroup
	for range raceWorkers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				i := next.Add(1)
				if i > raceCalls {
					return
				}
				if !call(int(i)) {
					refused.Add(1)
					// A refused call returns at once: without a pause, the calls would all be
					// spent while sub is a link, and few would race the mounts.
					time.Sleep(2 * time.Millisecond)
				}
			}
		}()
	}
	workers.Wait()
	close(stop)
	swapper.Wait()

	entries, err := os.ReadDir(home)
	must(t, err)
	for _, e := range entries {
		escapes.Add(1)
		t.Errorf("escape: %s was written outside the grant", filepath.Join(home, e.Name()))
	}
	t.Logf("%d calls, %d swaps, %d refused calls (%d by the init: the tree changed after the check), %d escapes (%.2f%%)",
		raceCalls, swaps.Load(), refused.Load(), caught.Load(), escapes.Load(), 100*float64(escapes.Load())/raceCalls)

	// Positive control after the race: the workspace is back as it was and the grant still works.
	if !call(-2) {
		t.Fatal("control: the race bundle's call failed after the race")
	}
	if _, err := os.Stat(filepath.Join(sub, "marker--2")); err != nil {
		t.Fatalf("control: the marker was not written into the granted directory: %v", err)
	}
}

// TestGrantOverManyFiles: a call whose grant covers a directory of a thousand files (what TestRace
// leaves behind: its markers) runs under the suite's open-file limit of 64. The init held a
// descriptor per Landlock rule path until the program's exec, so the plan's RLIMIT_NOFILE made
// verify's open and the fork's pipe fail with EMFILE (sandbox_unavailable).
func TestGrantOverManyFiles(t *testing.T) {
	s := newSuite(t)
	ws := fixture.Workspace(t)
	sub := filepath.Join(ws, "sub")
	must(t, os.Mkdir(sub, 0o755))
	for i := range 1000 {
		must(t, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d", i)), nil, 0o644))
	}
	fixture.GiveToAgent(t, ws)
	b, err := s.h.Bundle("race")
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := s.h.Call(ctx, b, "run", map[string]any{"case": "write", "args": []any{filepath.Join(sub, "marker")}}, host.Caller{Workspace: ws, User: "escape"}, host.CallOptions{})
	if !env.OK {
		t.Fatalf("a call over a granted directory of 1000 files: %+v", env.Error)
	}
	if _, err := os.Stat(filepath.Join(sub, "marker")); err != nil {
		t.Fatalf("the marker was not written: %v", err)
	}
}
