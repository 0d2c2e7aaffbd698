package tests

import (
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
