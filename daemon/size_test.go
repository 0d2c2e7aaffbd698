package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"65536": 65536, "64KiB": 64 << 10, "64K": 64 << 10, "64MiB": 64 << 20, "64M": 64 << 20,
		"1GiB": 1 << 30, "2G": 2 << 30, "100B": 100, " 8 MiB ": 8 << 20, "64 MB": 64 << 20, "1TiB": 1 << 40,
	} {
		var b ByteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "0MiB", "1.5MiB", "99999999999G", "MiB", "5 parsecs"} {
		var b ByteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, b)
		}
	}
}

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
