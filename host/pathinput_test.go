package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestPathInputsStayInWorkspace: an input declared `format: path` (alone, or as an array's items)
// is refused with path_traversal_blocked when it leaves the workspace, over every front end, since
// the host checks it (not only ACLI). Controls: a path inside the workspace runs, and a string
// without format: path is left to the CLI.
func TestPathInputsStayInWorkspace(t *testing.T) {
	files := fixture.True()
	files["true/tools/run/TOOL.md"] = strings.Replace(files["true/tools/run/TOOL.md"],
		"properties: { label: { type: string } }",
		"properties: { label: { type: string }, path: { type: string, format: path }, paths: { type: array, items: { type: string, format: path } } }", 1)
	files["true/tools/run/TOOL.md"] = strings.Replace(files["true/tools/run/TOOL.md"],
		`argv: ["${input.label | optional('--label')}"]`, `argv: ["${input.label | optional('--label')}", "--", "${input.path}", "${input.paths}"]`, 1)
	h, _ := writeBundle(t, files, Options{})
	b := bundle(t, h, "true")
	ws := fixture.Workspace(t)
	if err := os.Symlink("/etc", filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		`{"path": "../../../etc/passwd"}`,
		`{"path": "/etc/passwd"}`,
		`{"path": "~/.ssh/id_rsa"}`,
		`{"path": "out/passwd"}`,
		`{"paths": ["ok.txt", "a/../../x"]}`,
	} {
		env := h.Call(context.Background(), b, "run", js(t, in), Caller{Workspace: ws}, CallOptions{})
		if env.OK || env.Error == nil || env.Error.Code != "path_traversal_blocked" {
			t.Fatalf("%s: got %+v %+v, want path_traversal_blocked", in, env, env.Error)
		}
	}
	for _, in := range []string{`{"path": "sub/file.txt", "paths": ["a", "b/c"]}`, `{"label": "../../../etc/passwd"}`} {
		env := h.Call(context.Background(), b, "run", js(t, in), Caller{Workspace: ws}, CallOptions{})
		if !env.OK {
			t.Fatalf("control %s: %+v %+v", in, env, env.Error)
		}
	}
}
