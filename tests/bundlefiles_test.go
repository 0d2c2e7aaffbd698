package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDaemonRefusesSymlinkedBundleFiles: `clihostd -check` refuses a bundle whose vendored binary
// is a symlink to /bin/bash and one whose TOOL.md is a symlink to a file outside, each logged with
// the reason, and serves the bundle next to them.
func TestDaemonRefusesSymlinkedBundleFiles(t *testing.T) {
	dir := helloBundle(t, "https://example.invalid/hello.tar.gz", strings.Repeat("a", 64))
	for _, id := range []string{"bash", "outside"} {
		data, err := os.ReadFile(filepath.Join(dir, "hello", "CLI.md"))
		if err != nil {
			t.Fatal(err)
		}
		cli := strings.Replace(string(data), "id: hello", "id: "+id, 1)
		cli = strings.Replace(cli, "install:\n", "install:\n  - { method: vendored, path: ./bin/hello }\n", 1)
		writeFile(t, filepath.Join(dir, id, "CLI.md"), cli)
		tool, _ := os.ReadFile(filepath.Join(dir, "hello", "tools", "greet", "TOOL.md"))
		writeFile(t, filepath.Join(dir, id, "tools", "greet", "TOOL.md"), string(tool))
		writeFile(t, filepath.Join(dir, id, "bin", "hello"), "#!/bin/sh\n")
	}
	symlink(t, "/bin/bash", filepath.Join(dir, "bash", "bin", "hello"))
	outside := filepath.Join(t.TempDir(), "TOOL.md")
	tool, _ := os.ReadFile(filepath.Join(dir, "hello", "tools", "greet", "TOOL.md"))
	writeFile(t, outside, string(tool))
	symlink(t, outside, filepath.Join(dir, "outside", "tools", "greet", "TOOL.md"))

	bash, err := filepath.EvalSymlinks("/bin/bash")
	if err != nil {
		t.Fatal(err)
	}
	r := runBin(t, bin.daemon, "", "-check", "-no-catalog", "-bundles", dir)
	for _, want := range []string{
		`msg="bundle refused" bundle=bash@1`, `vendored binary \"./bin/hello\" resolves to ` + bash + `, outside the bundle folder`,
		`msg="bundle refused" bundle=outside@1`, `TOOL.md \"./tools/greet/TOOL.md\" resolves to ` + outside,
		`msg="bundle loaded" bundle=hello@1`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("clihostd -check: exit %d, no %q in\n%s", r.code, want, r.stderr)
		}
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}
