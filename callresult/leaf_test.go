package callresult

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeaves: callresult and sandboxprobe are leaves (the engine and the control API both import
// them), so they import nothing of the module but errcode, and only the standard library besides.
func TestLeaves(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", ".", "../sandboxprobe").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{"github.com/clihost/clihost/callresult": true, "github.com/clihost/clihost/sandboxprobe": true,
		"github.com/clihost/clihost/errcode": true}
	for line := range strings.Lines(string(out)) {
		path, std, _ := strings.Cut(strings.TrimSpace(line), " ")
		if std != "true" && !allowed[path] {
			t.Errorf("a leaf depends on %s", path)
		}
	}
}
