package clihost

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAtTheTop: the Go API sits at the top of the dependency graph beside cmd: no package of the
// module imports it except the commands under cmd/ and the end-to-end tests, so that no library package can
// reach the embedding surface, and none of the packages it imports imports it back (the compiler
// forbids the cycle; this names the rule). Test files are not checked.
func TestAtTheTop(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "github.com/clihost/clihost/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const root = "github.com/clihost/clihost"
	importers := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		for _, imp := range imports {
			if imp != root {
				continue
			}
			if !strings.HasPrefix(pkg, root+"/cmd/") && !strings.HasPrefix(pkg, root+"/tests") {
				t.Errorf("%s imports the Go API (%s): only cmd/ and tests/ may; library packages sit below it", pkg, root)
			}
			importers++
		}
	}
	if importers == 0 {
		t.Errorf("no command imports %s: clihostctl's in-process paths should go through it", root)
	}
}
