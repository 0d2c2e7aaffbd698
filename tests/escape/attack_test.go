package escape

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// denyRaceCalls bounds TestDenyPathRemovedBeforeInit: how many calls race the toggler. In the
// attack review (issue 10), about one call in ten won the race on today's code.
const denyRaceCalls = 300

// TestDenyPathRemovedBeforeInit is a race between the policy check and the masks, found in the
// attack review of issue 10: a mandatory deny path inside a writable tree (here .vscode, whose
// tasks.json VS Code runs on folder open) exists when sandbox.Compile looks, so it is to be masked
// and is not in the policy's Absent list (the paths the post-call sweep removes); a concurrent
// writer of the workspace (another call with a write grant, played here by a goroutine on the
// host) removes it before the sandbox's init opens it; the init skips a deny path it cannot find
// (openPlan: ENOENT), so the call runs with .vscode neither masked nor swept, creates
// .vscode/tasks.json, and it stays on the host after the call. The same holds for every deny path
// (.git/hooks, .git/config, fs.deny entries). Reproduced with two real concurrent calls (one
// toggling .vscode, one planting) as well.
//
// The assertion: after each call returns, no .vscode/tasks.json the call wrote is on the host.
// Positive control: without the toggler, a call planting into a missing .vscode gets its write
// swept (the existing persist/vscode-tasks-missing-dir case), and into an existing .vscode is
// refused by the mask.
func TestDenyPathRemovedBeforeInit(t *testing.T) {
	s := newSuite(t)
	ws := fixture.Workspace(t)
	vscode := filepath.Join(ws, ".vscode")
	tasks := filepath.Join(vscode, "tasks.json")
	b, err := s.h.Bundle("rw")
	must(t, err)
	call := func() host.Envelope {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		input := map[string]any{"case": "plant", "args": []any{tasks}}
		return s.h.Call(ctx, b, "run", input, host.Caller{Workspace: ws, User: "escape"}, host.CallOptions{})
	}

	// Controls: an existing .vscode is masked (the write fails, EROFS); a missing one is swept.
	must(t, os.Mkdir(vscode, 0o755))
	fixture.GiveToAgent(t, ws)
	r := callOn(t, s.h, "rw", ws, "plant", tasks)
	denied("write", "EROFS").check(t, r)
	must(t, os.Remove(vscode))
	r = callOn(t, s.h, "rw", ws, "plant", tasks)
	want{result: "allowed"}.check(t, r)
	if _, err := os.Lstat(vscode); err == nil {
		t.Fatalf("control: %s was not swept after the call", vscode)
	}

	stop := make(chan struct{})
	var toggler sync.WaitGroup
	toggler.Add(1)
	go func() {
		defer toggler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if os.Mkdir(vscode, 0o755) == nil {
				os.Lchown(vscode, fixture.AgentID, fixture.AgentID)
			}
			time.Sleep(300 * time.Microsecond)
			os.Remove(vscode) // fails once the call has planted tasks.json: it stays
			time.Sleep(300 * time.Microsecond)
		}
	}()
	var escapes, refused atomic.Int64
	for range denyRaceCalls {
		env := call()
		if !env.OK {
			refused.Add(1) // the init found the tree changed, or the mask target gone
		}
		if _, err := os.Lstat(tasks); err == nil {
			escapes.Add(1)
			os.RemoveAll(vscode)
		}
	}
	close(stop)
	toggler.Wait()
	t.Logf("%d calls, %d refused, %d left .vscode/tasks.json on the host", denyRaceCalls, refused.Load(), escapes.Load())
	if n := escapes.Load(); n > 0 {
		t.Errorf("escape: %d of %d calls left %s on the host (a deny path removed between the policy check and the init is neither masked nor swept)", n, denyRaceCalls, tasks)
	}
}
