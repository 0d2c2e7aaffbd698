package nsinit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/clihost/clihost/isolation"
)

// gatedWrite is a plan whose program writes the file ran in a writable directory of a work tree,
// and that path.
func gatedWrite(t *testing.T) (plan isolation.Plan, ran string) {
	t.Helper()
	rw := filepath.Join(workTree(t, "/var/tmp"), "rw")
	ran = filepath.Join(rw, "ran")
	p := sh(t, "echo ran > "+ran)
	p.ReadWrite = append(p.ReadWrite, rw)
	return p, ran
}

// TestZygoteProgramWaitsForItsGate: a call taken with a gate (the host's git snapshot, which runs
// while the zygote builds the sandbox) starts its program only once the gate returned. The gate
// here watches, for a second, for the file the program writes: a zygote that did not wait would
// have run it by then.
func TestZygoteProgramWaitsForItsGate(t *testing.T) {
	pool := zygotePool(t)
	p, ran := gatedWrite(t)
	runPooled(t, pool, sh(t, "true")) // a thread is ready
	early := false
	gate := func() error {
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && !early; time.Sleep(10 * time.Millisecond) {
			_, err := os.Stat(ran)
			early = err == nil
		}
		return nil
	}
	cmd, stdio, err := pool.Take(p, false, gate)
	if err != nil || cmd == nil || !cmd.FromZygote() {
		t.Fatalf("Take: %v, %v; want a sandbox of the zygote (stats %+v)", cmd, err, pool.Stats())
	}
	r := finishPooled(t, cmd, stdio)
	if early {
		t.Fatal("the program ran before its gate opened")
	}
	if _, err := os.Stat(ran); r.code != 0 || err != nil {
		t.Fatalf("exit %d, %v (stderr %q); want the program run once the gate opened", r.code, err, r.stderr)
	}
}

// TestZygoteRefusedGateRunsNothing: a gate that fails (a snapshot over its budget) is Take's error,
// the program never runs, and the zygote serves the next call.
func TestZygoteRefusedGateRunsNothing(t *testing.T) {
	pool := zygotePool(t)
	p, ran := gatedWrite(t)
	runPooled(t, pool, sh(t, "true"))
	refused := errors.New("refused by the test")
	cmd, _, err := pool.Take(p, false, func() error { return refused })
	if cmd != nil || !errors.Is(err, refused) {
		t.Fatalf("Take: %v, %v; want no sandbox and the gate's error", cmd, err)
	}
	if r := runPooled(t, pool, sh(t, "true")); r.code != 0 {
		t.Fatalf("the call after a refused gate: exit %d, %v", r.code, r.failure)
	}
	requireZygoteServed(t, pool, 3)
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the program of a call whose gate refused it ran (%v)", err)
	}
}
