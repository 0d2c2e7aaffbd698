package cobramcp

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestStaysLight: cobramcp is linked into other Cobra programs, so of clihost it may import only
// leaf packages — never the host, runner or sandbox (they brought ~45 more packages: landlock,
// seccomp, egress).
func TestStaysLight(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := []string{"github.com/clihost/clihost/cobramcp", "github.com/clihost/clihost/argv/scalar", "github.com/clihost/clihost/importer/cobra/usage"}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/clihost/clihost") && !slices.Contains(allowed, p) {
			t.Errorf("cobramcp depends on %s; keep it to %v", p, allowed)
		}
	}
}
