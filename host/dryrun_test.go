package host

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/registry"
)

// TestDryRunRefusesAsCallDoes: for inputs a call refuses before its CLI runs, the dry run fails
// with the same code; for the rest it shows the argv the call builds.
func TestDryRunRefusesAsCallDoes(t *testing.T) {
	fixture.Need(t, "jq")
	h, _ := catalogHost(t)
	h.opts.Sandbox.Off = true // the codes compared here come before the sandbox
	b := bundle(t, h, "jq")
	ws := t.TempDir()
	c := Caller{Workspace: ws, User: "tester"}
	for _, in := range []string{`{"nope": 1}`, `{"filter": "-x", "files": ["a.json"]}`, `{"filter": ".", "files": ["../../etc/passwd"]}`, `{"filter": ".", "files": ["/etc/passwd"]}`} {
		env := h.Call(context.Background(), b, "filter", js(t, in), c, CallOptions{})
		_, e := h.DryRun(b, "filter", js(t, in), c)
		if env.Error == nil || e == nil || e.Code != env.Error.Code {
			t.Errorf("%s: call %+v, dry run %+v", in, env.Error, e)
		}
	}
	if _, e := h.DryRun(b, "nosuch", nil, c); e == nil || e.Code != errcode.NotFound {
		t.Errorf("unknown tool: %+v", e)
	}
	d, e := h.DryRun(b, "filter", js(t, `{"filter": ".a", "files": ["x.json"], "compact": true}`), c)
	if e != nil {
		t.Fatal(e)
	}
	if d.Argv[0] != d.Binary || !slices.Contains(d.Argv, "x.json") || d.Cwd != ws || d.Policy != nil || !strings.Contains(strings.Join(d.NotChecked, "\n"), "OFF") {
		t.Errorf("dry run = %+v", d)
	}
}

// TestDryRunNotInstalled: a binary that is not there is the call's not_installed, found without
// running anything.
func TestDryRunNotInstalled(t *testing.T) {
	reg, err := registry.Load(registry.EmbeddedSource())
	if err != nil {
		t.Fatal(err)
	}
	h := New(reg, Options{LookupEnv: func(k string) (string, bool) {
		if k == "PATH" {
			return t.TempDir(), true
		}
		return os.LookupEnv(k)
	}})
	_, e := h.DryRun(bundle(t, h, "jq"), "eval", js(t, `{"json": "1", "filter": "."}`), Caller{Workspace: t.TempDir()})
	if e == nil || e.Code != errcode.NotInstalled {
		t.Fatalf("dry run = %+v", e)
	}
}
