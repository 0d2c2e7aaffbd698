package tests

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestCatalogPathInputsStayInWorkspace calls the catalog's real rg, jq and git through `clihostctl
// call` with paths that leave the workspace: the catalog marks them `format: path`, and the host
// refuses them (path_traversal_blocked) before any CLI runs. Before, rg searched /etc/passwd. The
// control reads a file inside the workspace.
func TestCatalogPathInputsStayInWorkspace(t *testing.T) {
	fixture.Need(t, "rg", "jq", "git")
	ws := fixture.Workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "data.json"), []byte(`{"root": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ bundle, tool, input string }{
		{"rg", "search", `{"pattern": "root", "path": "../../../../../../etc/passwd"}`},
		{"rg", "files", `{"path": "/etc"}`},
		{"jq", "filter", `{"filter": ".", "files": ["data.json", "../../../../../../etc/passwd"]}`},
		{"git", "log", `{"paths": ["/etc/passwd"]}`},
		{"ffmpeg", "thumbnail", `{"input": "a/../../x.mp4", "output": "t.png"}`},
	} {
		r := runBin(t, bin.ctl, "", "call", c.bundle, c.tool, "--workspace", ws, "--audit", os.DevNull, "--input", c.input)
		if e := decodeEnvelope(t, r); r.code != 1 || e.OK || e.Error == nil || e.Error.Code != "path_traversal_blocked" {
			t.Fatalf("%s %s %s: exit %d %+v\n%s", c.bundle, c.tool, c.input, r.code, e, r.stderr)
		}
	}
	r := runBin(t, bin.ctl, "", "call", "rg", "search", "--workspace", ws, "--audit", os.DevNull, "--input", `{"pattern": "root", "path": "data.json"}`)
	if e := decodeEnvelope(t, r); r.code != 0 || !e.OK {
		t.Fatalf("control: exit %d %+v\n%s", r.code, e, r.stderr)
	}
}
