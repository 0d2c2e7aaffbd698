package escape

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestTreeWalkers is issue 10 §5: real tree walkers (rg, grep -r, find, git status) over a
// workspace holding a denied directory and a denied file succeed (exit 0), as they do over the
// same workspace unsandboxed, and what is denied never appears in their output: a denied directory
// is an empty read-only directory and a denied file an empty read-only file. Positive control: the
// walkers find the same needle in the files that are not denied.
func TestTreeWalkers(t *testing.T) {
	fixture.Need(t, "rg", "grep", "find", "git")
	s := newSuite(t)
	ws := fixture.Workspace(t)
	write(t, ws, map[string]string{
		"hello.txt":       "needle in the open\n",
		"sub/ok.txt":      "needle nested\n",
		"private/key":     "needle SECRET-IN-DIR\n",
		"private/deep/k2": "needle SECRET-DEEPER\n",
		"secret.txt":      "needle SECRET-FILE\n",
	})
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", ws, "-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", "hello.txt", "sub/ok.txt") // the secrets are untracked, as secrets are
	git("commit", "-q", "-m", "init")
	fixture.GiveToAgent(t, ws)
	wsFn := func(*suite) string { return ws }
	walkers := []struct {
		name string
		want []string // lines of the output
	}{
		{"rg", []string{ws + "/hello.txt:1:needle in the open", ws + "/sub/ok.txt:1:needle nested"}},
		{"rg-files", []string{ws + "/hello.txt", ws + "/sub/ok.txt", ws + "/secret.txt"}},
		{"grep", []string{ws + "/hello.txt:needle in the open", ws + "/sub/ok.txt:needle nested"}},
		{"find", []string{ws, ws + "/hello.txt", ws + "/sub", ws + "/sub/ok.txt", ws + "/private", ws + "/secret.txt"}},
		{"git", []string{"?? secret.txt"}},
	}
	var table []probeCase
	for _, w := range walkers {
		table = append(table, probeCase{name: w.name, bundle: "walk", ws: wsFn, probe: "walk", args: lit(w.name, ws),
			want:  want{result: "allowed", step: "wait", without: []string{"SECRET", "private/"}},
			lines: w.want})
		// Baseline: unsandboxed, the same walker does see what the sandbox denies.
		if w.name != "git" {
			table = append(table, probeCase{name: w.name + "/baseline", bundle: "walk", ws: wsFn, probe: "walk", args: lit(w.name, ws),
				want: allowed("private/"), unsandboxed: true})
		}
	}
	s.run(t, table)
	// The denied files are still there on the host, untouched.
	for _, p := range []string{"private/key", "private/deep/k2", "secret.txt"} {
		if data, err := os.ReadFile(filepath.Join(ws, p)); err != nil || !strings.Contains(string(data), "SECRET") {
			t.Errorf("host side: %s: %q, %v", p, data, err)
		}
	}
}
