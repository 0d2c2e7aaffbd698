package host

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/filestamp"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
)

// TestConfineWarmSeesChanges: what confine keeps between calls (threads, user lookups,
// interpreters) never lets a call see the filesystem as it was. A host confines a call twice (its
// threads and user lookups warm, the user lookups' racy window off; the interpreter cache, whose
// window stays on here, has its own warm test in sandbox), then the workspace
// changes: a deny path (.env) appears, a git directory with hooks and config appears, a symbolic
// link fs.read names is swapped to another folder, the binary becomes a script of another
// interpreter. The warm host's next plan equals a cold host's, built for the same filesystem.
func TestConfineWarmSeesChanges(t *testing.T) {
	fixture.NeedSandbox(t, SandboxAvailable())
	oldRacy := filestamp.RacyWindow
	filestamp.RacyWindow = 0
	t.Cleanup(func() { filestamp.RacyWindow = oldRacy })
	files := fixture.True()
	files["true/CLI.md"] = strings.Replace(files["true/CLI.md"], "fs: { read: [], write: [] }",
		`fs: { read: ["./link/**"], write: ["./**"], deny: ["./.env", "./secrets/*"] }`, 1)
	files["true/CLI.md"] = strings.Replace(files["true/CLI.md"], "exec: { allow: false }", "exec: { allow: true, spawn: [] }", 1)
	ws := t.TempDir()
	fixture.WriteIn(t, ws, map[string]string{"a/x": "a", "b/x": "b", "secrets/.keep": ""})
	if err := os.Symlink("a", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "tool")
	if err := fixture.WriteFile(bin, []byte("#!/usr/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	fixture.Reachable(t, filepath.Dir(bin))
	warm, _ := writeBundle(t, files, Options{})
	plan := func(h *Host) *isolation.Plan {
		t.Helper()
		bd, err := h.Bundle("true")
		if err != nil {
			t.Fatal(err)
		}
		env := []string{}
		p, _, e := h.confine(bd, bd.Tool("run"), bin, Caller{Workspace: ws}, &env)
		if e != nil {
			t.Fatalf("confine: %+v", e)
		}
		return p
	}
	plan(warm)
	before := plan(warm)

	// Change, between two calls, everything the plan depends on.
	fixture.WriteIn(t, ws, map[string]string{".env": "TOKEN=1", "secrets/key": "k",
		".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n", ".git/hooks/pre-commit": "#!/bin/sh\n", ".vscode/tasks.json": "{}"})
	if err := os.Remove(filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(bin, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("#!/usr/bin/ls\n"), 0); err != nil { // the same size, in place
		t.Fatal(err)
	}
	f.Close()
	fixture.GiveToAgent(t, ws)

	after := plan(warm)
	cold, _ := writeBundle(t, files, Options{})
	want := plan(cold)
	after.Limits, want.Limits = isolation.Limits{}, isolation.Limits{}
	if !reflect.DeepEqual(after, want) {
		t.Fatalf("the warm host's plan differs from a cold host's:\nwarm %+v\ncold %+v", after, want)
	}
	for _, p := range []string{".env", "secrets/key", ".git/hooks", ".git/config", ".vscode"} {
		if !contains(after.Deny, filepath.Join(realWS(t, ws), p)) {
			t.Errorf("%s, created between two calls, is not denied in the second: %v", p, after.Deny)
		}
	}
	if contains(after.ReadOnly, filepath.Join(realWS(t, ws), "a")) || !contains(after.ReadOnly, filepath.Join(realWS(t, ws), "b")) {
		t.Errorf("the swapped link: read-only %v, want b and not a", after.ReadOnly)
	}
	if !contains(after.Exec, "/usr/bin/ls") || reflect.DeepEqual(before.Exec, after.Exec) {
		t.Errorf("the rewritten binary: exec %v (before %v), want ls in place of sh", after.Exec, before.Exec)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func realWS(t *testing.T, ws string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
