package daemon

import (
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/control"
)

// TestRunningInstallReports: while an attempt runs, a "running" event comes every tick with the
// time it has run and the package manager's latest line; none comes after stop.
func TestRunningInstallReports(t *testing.T) {
	var mu sync.Mutex
	var evs []control.InstallEvent
	r := startRunning("installing gh (attempt 2)", func(ev control.InstallEvent) { mu.Lock(); evs = append(evs, ev); mu.Unlock() }, 20*time.Millisecond)
	r.line("Reading package lists...")
	r.line("Unpacking gh (2.45.0) ...")
	time.Sleep(110 * time.Millisecond)
	r.stop()
	mu.Lock()
	n := len(evs)
	mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if n < 2 || len(evs) != n {
		t.Fatalf("%d events, then %d after stop", n, len(evs))
	}
	last := evs[n-1]
	if last.Phase != "running" || last.Message != "installing gh (attempt 2)" || last.Output != "Unpacking gh (2.45.0) ..." || last.ElapsedMS < 60 {
		t.Errorf("last event %+v", last)
	}
	for i := 1; i < n; i++ {
		if evs[i].ElapsedMS < evs[i-1].ElapsedMS {
			t.Errorf("elapsed went back: %d then %d", evs[i-1].ElapsedMS, evs[i].ElapsedMS)
		}
	}
}
