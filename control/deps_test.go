package control

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandsAlone: the control API's types are its own. clihostctl and other clients link this
// package, so it must not pull in the engine (host, mcp, daemon), the lifecycle stages, the
// runner or the sandbox (the plan a login command runs in is package isolation's, a leaf).
func TestStandsAlone(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/clihost/clihost/"
	forbidden := []string{"host", "mcp", "daemon", "runner", "sandbox", "install", "setup", "authstate", "lifecycle", "versioncheck", "registry", "store"}
	for _, p := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(p, mod)
		if !ok {
			continue
		}
		for _, f := range forbidden {
			if rel == f || strings.HasPrefix(rel, f+"/") {
				t.Errorf("control depends on %s", p)
			}
		}
	}
}
