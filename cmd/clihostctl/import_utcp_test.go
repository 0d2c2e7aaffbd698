package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const utcpManual = "../../importer/utcp/testdata/manual.json"

func TestImportUTCP(t *testing.T) {
	out := filepath.Join(t.TempDir(), "utcp-demo")
	code, stdout, stderr := runCtl(t, "import", "utcp", utcpManual, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "imported 8 tool(s)") || !strings.Contains(stdout, "bundle utcp-demo") {
		t.Errorf("stdout %q", stdout)
	}
	for _, want := range []string{`tool "count_files" refused: command 0 "find . -type f | wc -l", column 16: a pipe (|)`,
		`tool "status_and" refused`, "tool weather (http) skipped"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code, lintOut, lintErr := runCtl(t, "lint", "--strict", out); code != 0 {
		t.Fatalf("lint --strict: exit %d\n%s%s", code, lintOut, lintErr)
	}
	// Not into a folder that holds something, unless --force.
	if code, _, stderr := runCtl(t, "import", "utcp", utcpManual, "--out", out); code != 1 || !strings.Contains(stderr, "--force") {
		t.Errorf("non-empty --out: exit %d %s", code, stderr)
	}
	if code, _, stderr := runCtl(t, "import", "utcp", utcpManual, "--out", out, "--force"); code != 0 {
		t.Errorf("--force: exit %d %s", code, stderr)
	}
	// --strict: a refusal is fatal and nothing is written.
	strict := filepath.Join(t.TempDir(), "strict")
	if code, _, stderr := runCtl(t, "import", "utcp", utcpManual, "--out", strict, "--strict"); code != 1 || !strings.Contains(stderr, "refused (--strict)") {
		t.Errorf("--strict: exit %d %s", code, stderr)
	}
	if _, err := os.Stat(strict); !os.IsNotExist(err) {
		t.Errorf("--strict wrote %s", strict)
	}
	if code, _, _ := runCtl(t, "import", "utcp", utcpManual); code != 2 {
		t.Errorf("without --out: exit %d, want 2", code)
	}
}
