package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestDaemonKeptPolicyFollowsTheWorkspace: through clihostd as root and as the shipped unit's
// unprivileged user, calls of one tool use the sandbox policy of the call before
// (clihost_sandbox_policies_reused_total grows) until the workspace's owner makes the denied .env
// a link to another file of the workspace: the next call compiles a policy that masks the link's
// target too, and cannot read it.
func TestDaemonKeptPolicyFollowsTheWorkspace(t *testing.T) {
	needRoot(t)
	for _, as := range []string{"root", "nobody"} {
		t.Run(as, func(t *testing.T) {
			d := startCatDaemon(t, as)
			token := filepath.Join(d.ws, "token.txt")
			if err := os.WriteFile(token, []byte("tok-1234\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(token, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			show := func(path string) result {
				t.Helper()
				return d.ctl(t, "call", "cat", "show", "--workspace", d.ws, "--input", `{"path":"`+path+`"}`)
			}
			for i := range 4 {
				if r := show("token.txt"); r.code != 0 || !strings.Contains(r.stdout, "tok-1234") {
					t.Fatalf("call %d: the token before .env exists: %q (exit %d, stderr %s)", i, r.stdout, r.code, r.stderr)
				}
			}
			reused, ok := fixture.MetricValue(d.metrics(t), "clihost_sandbox_policies_reused_total")
			if !ok || reused < 3 {
				t.Fatalf("%v of 4 calls used a kept policy, want 3", reused)
			}
			if err := os.Symlink("token.txt", filepath.Join(d.ws, ".env")); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(filepath.Join(d.ws, ".env"), nobody, nobody); err != nil {
				t.Fatal(err)
			}
			if r := show("token.txt"); strings.Contains(r.stdout, "tok-1234") {
				t.Fatalf("read the target of the denied .env, made a link after the last call: %q", r.stdout)
			}
		})
	}
}

// TestDaemonKeptPolicyInAGitWorkTree: through clihostd (root, the catalog's git bundle), calls of
// Debian's git add, which may write its workspace, in a git work tree use the sandbox policy of the
// call before, until the work tree's owner adds a submodule's git directory: the next call compiles
// afresh (and masks its hooks), and the calls after it use that policy again.
func TestDaemonKeptPolicyInAGitWorkTree(t *testing.T) {
	r := newCatGitRepo(t, "clihost-t-keptgit", nil)
	d := startDaemonWith(t, t.TempDir(), r.ws, nil, "--approvals", r.policy)
	add := func(step string) {
		t.Helper()
		res := d.ctl(t, "call", "git", "add", "--workspace", r.ws, "--input", `{"paths": ["a.txt"]}`)
		if res.code != 0 {
			t.Fatalf("%s: git add exited %d: %s %s", step, res.code, res.stdout, res.stderr)
		}
	}
	reused := func() float64 {
		t.Helper()
		v, ok := fixture.MetricValue(d.metrics(t), "clihost_sandbox_policies_reused_total")
		if !ok {
			t.Fatal("no clihost_sandbox_policies_reused_total in the metrics")
		}
		return v
	}
	for i := range 4 {
		r.write(t, "a.txt", fmt.Sprintf("change %d\n", i))
		add(fmt.Sprint("call ", i))
	}
	if n := reused(); n < 3 {
		t.Fatalf("%v of 4 calls in a git work tree used a kept policy, want 3", n)
	}
	// The owner adds a submodule's git directory (as `git submodule add` would).
	module := filepath.Join(r.ws, ".git", "modules", "lib")
	for _, dir := range []string{filepath.Join(module, "hooks"), filepath.Join(module, "refs")} {
		must(t, os.MkdirAll(dir, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(module, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(module, "config"), []byte("[core]\n"), 0o644))
	before := reused()
	add("after the submodule's git directory was made")
	if n := reused(); n != before {
		t.Fatalf("the call after a submodule's git directory appeared used a kept policy (%v -> %v)", before, n)
	}
	add("the call after it")
	if n := reused(); n != before+1 {
		t.Fatalf("the call after the recompiled one did not use it (%v -> %v)", before, n)
	}
}
