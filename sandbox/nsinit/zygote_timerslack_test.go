package nsinit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/spawn"
)

// TestZygoteTimerSlack: the zygote's threads run with zygoteTimerSlack (fewer wake-ups of its Go
// runtime's monitor), and a call's program starts with Linux's default, as any program does.
func TestZygoteTimerSlack(t *testing.T) {
	pool := zygotePool(t)
	r := runPooled(t, pool, sh(t, "read s < /proc/self/timerslack_ns; echo $s"))
	requireZygoteServed(t, pool, 1)
	if want := strconv.FormatInt(spawn.DefaultTimerSlack.Nanoseconds(), 10); r.code != 0 || strings.TrimSpace(r.stdout) != want {
		t.Errorf("the program's timer slack: %q (exit %d), want %s ns", r.stdout, r.code, want)
	}
	if os.Geteuid() != 0 {
		return // the zygote is not dumpable: only root may read its threads' slack
	}
	ids, err := os.ReadDir("/proc/" + strconv.Itoa(zygotePID(t, pool)) + "/task")
	if err != nil || len(ids) < 2 {
		t.Fatalf("the zygote's threads: %v %v", ids, err)
	}
	for _, id := range ids {
		f := filepath.Join("/proc", id.Name(), "timerslack_ns") // a thread's, by its id
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a thread that ended since (one that served a call, or a sandbox built ahead)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != strconv.FormatInt(zygoteTimerSlack.Nanoseconds(), 10) {
			t.Errorf("%s: %s ns, want zygoteTimerSlack", f, got)
		}
	}
}
