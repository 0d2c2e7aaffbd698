package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestRaiseTimerSlack: as root, every thread of the process takes TimerSlack (those started later
// inherit it); the test's threads get Linux's default back after.
func TestRaiseTimerSlack(t *testing.T) {
	fixture.NeedRoot(t)
	tasks := func() []string {
		ids, err := os.ReadDir("/proc/self/task")
		if err != nil || len(ids) < 2 {
			t.Fatalf("threads: %v %v", ids, err)
		}
		var files []string
		for _, id := range ids {
			files = append(files, filepath.Join("/proc", id.Name(), "timerslack_ns"))
		}
		return files
	}
	t.Cleanup(func() {
		for _, f := range tasks() {
			_ = os.WriteFile(f, []byte("50000"), 0)
		}
	})
	if !RaiseTimerSlack() {
		t.Fatal("RaiseTimerSlack reported a thread it could not set, as root")
	}
	for _, f := range tasks() {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		if n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); n < TimerSlack.Nanoseconds() {
			t.Errorf("%s: %d ns, want at least %d", f, n, TimerSlack.Nanoseconds())
		}
	}
}
