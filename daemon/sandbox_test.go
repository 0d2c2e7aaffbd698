package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAuditMasked: every file of the rotated audit log is masked in the sandbox.
func TestAuditMasked(t *testing.T) {
	state := t.TempDir()
	o, err := sandboxOptions(slog.New(slog.DiscardHandler), Config{EgressPorts: "443", AuditKeep: 2}, state, filepath.Join(state, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"audit.jsonl", "audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.new"} {
		if !slices.Contains(o.ExtraDeny, filepath.Join(state, name)) {
			t.Errorf("%s is not masked: %v", name, o.ExtraDeny)
		}
	}
}

// TestAbsentLocalBundlesAreSwept: a daemon that would load ./.cli at its next start (no --bundles,
// no $CLIHOST_BUNDLES) and has none now denies ./.cli in calls, so that one a tool creates there is
// swept away after the call; an existing ./.cli (loaded, kept read-only) and named bundle folders
// are not denied. Before the fix nothing kept a tool from planting bundles for the next start.
func TestAbsentLocalBundlesAreSwept(t *testing.T) {
	t.Setenv("CLIHOST_BUNDLES", "")
	dir := t.TempDir()
	t.Chdir(dir)
	state := t.TempDir()
	opts := func(c Config) []string {
		c.EgressPorts = "443"
		o, err := sandboxOptions(slog.New(slog.DiscardHandler), c, state, filepath.Join(state, "s.sock"))
		if err != nil {
			t.Fatal(err)
		}
		return o.ExtraDeny
	}
	local := filepath.Join(dir, ".cli")
	if deny := opts(Config{}); !slices.Contains(deny, local) {
		t.Errorf("no ./.cli: %s is not denied: %v", local, deny)
	}
	if deny := opts(Config{Bundles: []string{"/etc/clihost/bundles"}}); slices.Contains(deny, local) {
		t.Errorf("--bundles given: %s is denied: %v", local, deny)
	}
	if err := os.Mkdir(local, 0o755); err != nil {
		t.Fatal(err)
	}
	if deny := opts(Config{}); slices.Contains(deny, local) {
		t.Errorf("an existing ./.cli (a bundle source) is masked: %v", deny)
	}
}

// TestEgressMaxConns: Config.EgressMaxConns reaches the sandbox options.
func TestEgressMaxConns(t *testing.T) {
	state := t.TempDir()
	o, err := sandboxOptions(slog.New(slog.DiscardHandler), Config{EgressPorts: "443", EgressMaxConns: 7}, state, filepath.Join(state, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if o.EgressMaxConns != 7 {
		t.Errorf("EgressMaxConns %d, want 7", o.EgressMaxConns)
	}
}
