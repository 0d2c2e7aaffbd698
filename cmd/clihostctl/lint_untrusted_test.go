package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeMini writes the mini bundle with env and argv replaced, and returns its folder.
func writeMini(t *testing.T, env, argv string) string {
	t.Helper()
	dir := t.TempDir()
	cli, err := os.ReadFile("testdata/tree/.cli/mini/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	tool, err := os.ReadFile("testdata/tree/.cli/mini/tools/run/TOOL.md")
	if err != nil {
		t.Fatal(err)
	}
	c := strings.Replace(string(cli), "env: { pass: [HOME] }", env, 1)
	c = strings.Replace(c, `fs: { read: ["**/*.txt"], write: [] }`, "fs: { read: [], write: [] }", 1)
	tl := strings.Replace(string(tool), `argv: [run, "--", "${input.arg}"]`, argv, 1)
	if err := os.MkdirAll(filepath.Join(dir, "mini/tools/run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mini/CLI.md"), []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mini/tools/run/TOOL.md"), []byte(tl), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLintSecretInArgv: a ${secrets.X} on the command line is readable by every local user; lint
// warns (secret-in-argv) and names the alternatives. The positional control has no finding.
func TestLintSecretInArgv(t *testing.T) {
	dir := writeMini(t, "env: { pass: [HOME] }", `argv: [run, "--token=${secrets.API_TOKEN}", "--", "${input.arg}"]`)
	code, out, errOut := runCtl(t, "lint", "--strict", dir)
	if code != 1 || !strings.Contains(out, "warning: secret-in-argv: ${secrets.API_TOKEN} is on the command line") ||
		!strings.Contains(out, "runner.stdin") || !strings.Contains(out, "env") {
		t.Fatalf("exit %d, want 1 with secret-in-argv naming env and runner.stdin:\n%s%s", code, out, errOut)
	}
	control := writeMini(t, "env: { pass: [HOME] }", `argv: [run, "--", "${input.arg}"]`)
	if code, out, errOut := runCtl(t, "lint", control); strings.Contains(out, "secret-in-argv") || code != 0 {
		t.Fatalf("control: exit %d\n%s%s", code, out, errOut)
	}
}

// TestLintLoaderEnv: env.pass or env.set of a dynamic-loader variable loads code into the CLI; it
// is an error (sandbox-env-loader) for each such name, and only for those.
func TestLintLoaderEnv(t *testing.T) {
	dir := writeMini(t, "env: { pass: [HOME] }", `steps: [{ argv: [run], env: { LD_PRELOAD: /tmp/x.so } }]`)
	if code, out, errOut := runCtl(t, "lint", dir); code != 1 || !strings.Contains(out, "error: sandbox-env-loader: step 0's env names LD_PRELOAD") {
		t.Fatalf("step env: exit %d, want 1 with sandbox-env-loader:\n%s%s", code, out, errOut)
	}
	for _, env := range []string{
		"env: { pass: [HOME, LD_PRELOAD] }",
		"env: { pass: [ld_preload] }",
		"env: { pass: [LD_LIBRARY_PATH] }",
		"env: { set: { LD_AUDIT: /tmp/a.so } }",
		"env: { set: { DYLD_INSERT_LIBRARIES: /tmp/a.dylib } }",
		"env: { pass: [GCONV_PATH] }",
	} {
		dir := writeMini(t, env, `argv: [run, "--", "${input.arg}"]`)
		code, out, errOut := runCtl(t, "lint", dir)
		if code != 1 || strings.Count(out, "error: sandbox-env-loader:") != 1 {
			t.Fatalf("%s: exit %d, want 1 with one sandbox-env-loader error:\n%s%s", env, code, out, errOut)
		}
	}
	control := writeMini(t, "env: { pass: [HOME, LANG], set: { LOAD_X: y } }", `argv: [run, "--", "${input.arg}"]`)
	if code, out, errOut := runCtl(t, "lint", control); code != 0 {
		t.Fatalf("control: exit %d\n%s%s", code, out, errOut)
	}
}

// TestLintNonexistentIsUsage: a path that does not exist is bad usage (exit 2), not a finding.
func TestLintNonexistentIsUsage(t *testing.T) {
	code, out, errOut := runCtl(t, "lint", filepath.Join(t.TempDir(), "nonexistent"))
	if code != 2 || !strings.Contains(errOut, "nonexistent") {
		t.Fatalf("exit %d, want 2; stdout %q stderr %q", code, out, errOut)
	}
}
