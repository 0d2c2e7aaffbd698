package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestPreCommitHook runs the hook .pre-commit-hooks.yaml defines the way a user's pre-commit does
// (pre-commit try-repo: it builds clihostctl from this repository with Go, language golang) in a
// repository holding a bundle with an error in .cli: the hook fails with lint's finding, lints that
// folder only (not the built-in catalog), and passes once the bundle is fixed.
func TestPreCommitHook(t *testing.T) {
	fixture.Need(t, "pre-commit", "git", "go")
	fixture.Slow(t)
	root, _ := filepath.Abs("../../")
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	if out, err := exec.Command("cp", "-r", "../../cmd/clihostctl/testdata/tree/.cli", dir+"/.cli").CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	git("add", ".cli")
	git("commit", "-q", "-m", "a bundle")
	cache := filepath.Join(t.TempDir(), "cache") // pre-commit's hook environments, built once
	try := func() fixture.Output {
		t.Helper()
		cmd := exec.Command("pre-commit", "try-repo", root, "clihost-lint", "--all-files")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PRE_COMMIT_HOME="+cache)
		o, err := fixture.Run(cmd)
		if err != nil {
			t.Fatalf("pre-commit try-repo: %v", err)
		}
		return o
	}
	o := try()
	if o.Code == 0 || !strings.Contains(o.Stdout, "error: sandbox-glob-unenforceable") || !strings.Contains(o.Stdout, "1 bundle(s)") {
		t.Fatalf("the hook on a bundle with an error: want it to fail with lint's finding on .cli only: exit %d\n%s%s", o.Code, o.Stdout, o.Stderr)
	}
	cli := filepath.Join(dir, ".cli", "mini", "CLI.md")
	data, err := os.ReadFile(cli)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cli, []byte(strings.Replace(string(data), `"**/*.txt"`, `"./**"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "fixed")
	if o := try(); o.Code != 0 {
		t.Errorf("the hook on the fixed bundle (a warning only): exit %d\n%s%s", o.Code, o.Stdout, o.Stderr)
	}
}
