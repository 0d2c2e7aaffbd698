package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/registry"
)

// TestCallsCannotAddBundles: a daemon started in a project loads the project's ./.cli (its default
// bundle source) and reloads it when it changes. A tool that may write the workspace must not add
// a bundle there: the new bundle would choose its own sandbox (all files, any network, any
// program), which the agent could then call. The bundle folders were protected, the folder they
// are loaded from was not; now every directory bundles are loaded from is read-only in calls.
// Positive control: the same tool creates a folder elsewhere in the workspace.
func TestCallsCannotAddBundles(t *testing.T) {
	fixture.Need(t, "mkdir")
	ws := fixture.Workspace(t)
	src := filepath.Join(ws, registry.LocalDir)
	for p, c := range refusalBundles() {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(ws, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	reg := fixture.Load(t, src)
	h := New(reg, Options{})
	b := bundle(t, h, "mkdir")
	// mkdir's sandbox writes ./out/**: let it write the whole workspace, as an editing agent's tool does.
	b.CLI.Sandbox.FS.Write = []string{"./**"}
	mkdir := func(p string) Envelope {
		return h.Call(context.Background(), b, "run", map[string]any{"paths": []any{p}}, Caller{Workspace: ws}, CallOptions{})
	}
	if env := mkdir("out/new"); !env.OK {
		t.Fatalf("positive control, mkdir out/new: %+v", env.Error)
	}
	env := mkdir(".cli/evil")
	if _, err := os.Stat(filepath.Join(src, "evil")); err == nil {
		t.Fatalf("a call created a bundle folder in %s, which the daemon loads bundles from (%+v)", src, env)
	}
	if env.OK {
		t.Fatalf("mkdir .cli/evil succeeded without creating it? %+v", env)
	}
}
