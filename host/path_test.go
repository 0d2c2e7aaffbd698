package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestEnvScriptsFindTheirInterpreterOnPATH runs a CLI that is a `#!/usr/bin/env prog` script (as
// npm installs them) whose prog lives on the host's PATH only: the sandboxed process gets PATH.
func TestEnvScriptsFindTheirInterpreterOnPATH(t *testing.T) {
	dir := t.TempDir()
	fixture.Need(t, "/bin/dash")
	sh, err := os.ReadFile("/bin/dash")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		if err := fixture.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("myinterp", sh)
	write("envtool", []byte("#!/usr/bin/env myinterp\necho \"envtool (GNU coreutils) 9.1 via env: $*\"\n"))
	lookup := func(k string) (string, bool) {
		if k == "PATH" {
			return dir + ":/usr/bin:/bin", true
		}
		return "", false
	}
	files := map[string]string{
		"envtool/CLI.md":            fixture.CLI("envtool", "envtool", "  run: ./tools/run/TOOL.md\n"),
		"envtool/tools/run/TOOL.md": fixture.True()["true/tools/run/TOOL.md"],
	}
	files["envtool/tools/run/TOOL.md"] = strings.ReplaceAll(files["envtool/tools/run/TOOL.md"], "true.run", "envtool.run")
	h, _ := writeBundle(t, files, Options{LookupEnv: lookup})
	b := bundle(t, h, "envtool")
	env := h.Call(context.Background(), b, "run", js(t, `{"label": "x"}`), Caller{Workspace: fixture.Workspace(t)}, CallOptions{})
	if !env.OK || !strings.Contains(env.Value.(string), "via env: --label=x") {
		t.Fatalf("%+v %+v", env, env.Error)
	}
}
