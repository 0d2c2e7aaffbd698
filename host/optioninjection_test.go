package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestOptionInjectionThroughCall sends the values through host.Call to the real ls: before
// the fix "--version" came back as ls's version and "-la" as a long listing; now each is refused
// as input_invalid before any process starts. Lint warns about the template.
func TestOptionInjectionThroughCall(t *testing.T) {
	fixture.Need(t, "ls")
	reg := fixture.Load(t, fixture.Write(t, fixture.LS()))
	fs := reg.AllFindings()
	if len(fs) != 1 || fs[0].Rule != "argv-option-value" || !strings.Contains(fs[0].Hint, `"-1${input.path}"`) {
		t.Fatalf("findings %v, want one argv-option-value warning", fs)
	}
	h := New(reg, Options{})
	b := bundle(t, h, "ls")
	ws := fixture.Workspace(t)
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "sub", "a.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	for _, v := range []string{"--version", "-la", "-R /", "--help", "--pre=/bin/sh", "-"} {
		env := h.Call(context.Background(), b, "list", map[string]any{"path": v}, Caller{Workspace: ws}, CallOptions{})
		if env.OK || env.Error == nil || env.Error.Code != "input_invalid" || env.Error.Pointer != "/path" || !strings.Contains(env.Error.Hint, "./-name") {
			t.Errorf("%q: %+v %+v", v, env, env.Error)
		}
	}
	// Positive control: an ordinary value runs.
	env := h.Call(context.Background(), b, "list", map[string]any{"path": "sub"}, Caller{Workspace: ws}, CallOptions{})
	if !env.OK || env.Value != "a.txt\n" {
		t.Fatalf("ls -1 sub: %#v %+v", env.Value, env.Error)
	}
}

// TestCatalogPassesDashValuesGlued: the catalog glues option values, so a value that starts with
// '-' reaches its option instead of being refused or read as an option: rg's pattern ("--pre=…" is
// searched for, not run) and a glob.
func TestCatalogPassesDashValuesGlued(t *testing.T) {
	fixture.Need(t, "rg")
	h, _ := catalogHost(t)
	ws := fixture.Workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("alpha\nuse --pre=/bin/sh here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	env := h.Call(context.Background(), bundle(t, h, "rg"), "search", map[string]any{"pattern": "--pre=/bin/sh", "fixed_strings": true}, Caller{Workspace: ws}, CallOptions{})
	if !env.OK || !strings.Contains(env.Value.(string), "notes.txt:2:use --pre=/bin/sh here") {
		t.Fatalf("rg search for --pre=/bin/sh: %#v %+v", env.Value, env.Error)
	}
	env = h.Call(context.Background(), bundle(t, h, "rg"), "count", map[string]any{"pattern": "-", "fixed_strings": true, "glob": "-nothing"}, Caller{Workspace: ws}, CallOptions{})
	if env.OK || env.Error.Code != "no_match" {
		t.Fatalf("rg count with glob -nothing: %#v %+v", env.Value, env.Error)
	}
}
