package host

import (
	"testing"

	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
)

// TestExposedFieldNumbers: a structured secret's numeric field reaches the CLI as written, not as
// a float64's rendering (a 19-digit key id came out as 1.2345678901234568e+18).
func TestExposedFieldNumbers(t *testing.T) {
	b := &manifest.Bundle{CLI: &manifest.CLI{ID: "vault"}}
	slot := manifest.SecretSlot{Slug: "vault-key", Kind: "json"}
	for field, want := range map[string]string{"id": "1234567890123456789", "n": "42", "f": "0.5", "ok": "true", "s": "x"} {
		got, e := exposed(b, slot, manifest.SecretEnv{Name: "V", Field: field}, `{"id": 1234567890123456789, "n": 42, "f": 0.5, "ok": true, "s": "x"}`, lifecycle.Scope{})
		if e != nil || got != want {
			t.Errorf("%s: %q %v, want %q", field, got, e, want)
		}
	}
}
