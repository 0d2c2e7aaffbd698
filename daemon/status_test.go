package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// ghost is a bundle whose binary is on no PATH and in no state directory.
func ghost() map[string]string {
	return map[string]string{
		"ghost/CLI.md":            fixture.CLI("clihost-no-such-program", "ghost", "  run: ./tools/run/TOOL.md\n"),
		"ghost/tools/run/TOOL.md": strings.ReplaceAll(fixture.True()["true/tools/run/TOOL.md"], "true.run", "ghost.run"),
	}
}

// withSetup is fixture True as bundle "prep", with a setup step nobody has answered.
func withSetup() map[string]string {
	cli := strings.Replace(fixture.CLI("true", "prep", "  run: ./tools/run/TOOL.md\n"), "sandbox:\n",
		"setup:\n  - { id: token, kind: prompt, type: secret, prompt: \"API token\", persist: { env: PREP_TOKEN } }\nsandbox:\n", 1)
	return map[string]string{
		"prep/CLI.md":            cli,
		"prep/tools/run/TOOL.md": strings.ReplaceAll(fixture.True()["true/tools/run/TOOL.md"], "true.run", "prep.run"),
	}
}

// TestStatusAssembly: status reports each bundle from what a real sandboxed version check finds
// and the store holds: an installed CLI is ready with its path and version, a missing one says
// how to install it, one whose setup is pending is installed but not ready and names the setup
// command, an unknown name is an error; the daemon's status counts the bundles.
func TestStatusAssembly(t *testing.T) {
	e := testEngine(t, merge(fixture.True(), ghost(), withSetup()), nil)
	ctx := context.Background()
	all, err := e.Status(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for i, s := range all {
		got[s.ID] = i
	}
	if len(all) != 3 {
		t.Fatalf("Status lists %d bundles, want 3: %+v", len(all), all)
	}
	tr := all[got["true"]]
	if tr.Install != "installed" || !tr.Ready || tr.BinPath == "" || tr.Version == "" || tr.Key != "true@1" || tr.Tools != 1 ||
		tr.Setup != "none" || tr.Auth != "none" || tr.Reason != "" || tr.Sandbox == "" {
		t.Errorf("true: %+v", tr)
	}
	g := all[got["ghost"]]
	if g.Install != "missing" || g.Ready || !strings.Contains(g.Reason, "run: clihostctl install ghost") {
		t.Errorf("ghost: %+v", g)
	}
	p := all[got["prep"]]
	if p.Install != "installed" || p.Setup != "pending" || p.Ready ||
		!strings.Contains(p.Reason, "setup is not complete; run: clihostctl setup prep --workspace "+shellWord(e.workspace)) {
		t.Errorf("prep: %+v", p)
	}
	one, err := e.Status(ctx, "true@1")
	if err != nil || len(one) != 1 || one[0].ID != "true" {
		t.Errorf("Status(true@1) = %+v, %v", one, err)
	}
	if _, err := e.Status(ctx, "nothing-here"); err == nil {
		t.Error("Status of an unknown bundle: no error")
	}
	ds := e.Daemon(ctx, false)
	if ds.Bundles.Loaded != 3 || ds.Bundles.Refused != 0 || ds.Version != "test" || ds.StateDir != e.stateDir || ds.Workspace != e.workspace {
		t.Errorf("Daemon: %+v", ds)
	}
}
