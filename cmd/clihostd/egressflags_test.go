package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// TestEgressMaxConnsFlag: --egress-max-conns must be positive, and reaches the sandbox options.
func TestEgressMaxConnsFlag(t *testing.T) {
	for _, args := range [][]string{{"--egress-max-conns", "0"}, {"--egress-max-conns", "-5"}, {"--egress-max-conns", "many"}} {
		var stderr bytes.Buffer
		if code := run(args, &stderr); code != 2 {
			t.Errorf("clihostd %s: exit %d, want 2 (%s)", strings.Join(args, " "), code, stderr.String())
		}
	}
	state := t.TempDir()
	o, err := sandboxOptions(slog.New(slog.DiscardHandler), config{ports: "443", maxConns: 7}, state, filepath.Join(state, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if o.EgressMaxConns != 7 {
		t.Errorf("EgressMaxConns %d, want 7", o.EgressMaxConns)
	}
}
