package daemon

import (
	"log/slog"
	"path/filepath"
	"testing"
)

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
