package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// TestMain lets this test binary act as the sandbox's init: an Engine's host re-execs its own
// executable to build the sandbox of every process it runs (probe, version check, call).
func TestMain(m *testing.M) {
	nsinit.Main()
	os.Exit(m.Run())
}

// testEngine is an Engine over a new state directory, serving the bundles of files (fixture
// layout) and no catalog, in a new workspace given to fixture.AgentID, with the real sandbox. edit,
// when not nil, changes the configuration first. The Engine is closed when the test ends.
func testEngine(t *testing.T, files map[string]string, edit func(*Config)) *Engine {
	t.Helper()
	fixture.NeedRoot(t)
	state := t.TempDir()
	fixture.Reachable(t, state)
	bundles := fixture.Write(t, files)
	for name := range files {
		if strings.Contains(name, "/bin/") { // a vendored binary
			if err := os.Chmod(filepath.Join(bundles, name), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	fixture.Reachable(t, bundles)
	c := Config{StateDir: state, Socket: filepath.Join(state, "clihostd.sock"), Bundles: []string{bundles}, NoCatalog: true,
		Workspace: fixture.Workspace(t), EgressPorts: "443", EgressMaxConns: DefaultEgressMaxConns,
		AuditMaxSize: host.AuditMaxSize, AuditKeep: host.AuditKeep, Approvals: filepath.Join(t.TempDir(), "approvals.yaml"),
		Version: "test"}
	if edit != nil {
		edit(&c)
	}
	e, err := New(context.Background(), slog.New(slog.DiscardHandler), c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

// merge is the union of bundle file sets.
func merge(sets ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, s := range sets {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}
