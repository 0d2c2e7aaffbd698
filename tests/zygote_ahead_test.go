package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// catBundle writes into dir a bundle "cat" whose tool show prints the workspace file named by
// input path, with the workspace readable and its .env denied, and returns dir.
func catBundle(t *testing.T, dir string) string {
	t.Helper()
	cli := strings.Replace(fixture.CLI("cat", "cat", "  show: ./tools/show/TOOL.md\n"),
		"fs: { read: [], write: [] }", `fs: { read: ["./**"], write: [], deny: ["./.env"] }`, 1)
	fixture.WriteIn(t, dir, map[string]string{
		"cat/CLI.md": cli,
		"cat/tools/show/TOOL.md": `---
name: Show
id: cat.show
description: Prints a file of the workspace.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { path: { type: string } }, required: [path] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["--", "${input.path}"] }
---
`,
	})
	return dir
}

// startCatDaemon starts clihostd serving catBundle, as root or as nobody (the shipped unit's
// unprivileged user, with a home, state and workspace of its own).
func startCatDaemon(t *testing.T, as string) *daemonProc {
	t.Helper()
	if as == "root" {
		return startDaemon(t, t.TempDir(), "--bundles", catBundle(t, t.TempDir()), "--no-catalog")
	}
	dir := nobodyDir(t)
	args := []string{"--bundles", catBundle(t, filepath.Join(dir, "bundles")), "--no-catalog"}
	return startDaemonWith(t, filepath.Join(dir, "state"), filepath.Join(dir, "ws"), func(c *exec.Cmd) {
		c.Env = []string{"PATH=" + systemPath, "HOME=" + filepath.Join(dir, "home"), "CLIHOST_BUNDLES="}
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}, args...)
}

// TestDaemonBuildsPacedCallsSandboxesAhead: an agent's calls of one tool, each after a pause,
// through clihostd as root and as the shipped unit's unprivileged user: the daemon builds the next
// call's sandbox ahead (clihost_sandbox_zygote_ahead_total grows), each call reads what the
// workspace holds when it is made (a file written between two calls), and the workspace's .env,
// replaced between two calls as an editor saves it, stays denied to every call. (The calls that
// follow a change of the workspace's top folder, which is split around .env for Landlock, get a
// sandbox built for them: about half of these.)
func TestDaemonBuildsPacedCallsSandboxesAhead(t *testing.T) {
	needRoot(t)
	for _, as := range []string{"root", "nobody"} {
		t.Run(as, func(t *testing.T) {
			d := startCatDaemon(t, as)
			env := filepath.Join(d.ws, ".env")
			write := func(path, content string) {
				t.Helper()
				if err := os.WriteFile(path+".tmp", []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(path+".tmp", nobody, nobody); err != nil && as == "nobody" {
					t.Fatal(err)
				}
				if err := os.Rename(path+".tmp", path); err != nil {
					t.Fatal(err)
				}
			}
			write(env, "TOKEN=first\n")
			notes := filepath.Join(d.ws, "notes")
			if err := os.Mkdir(notes, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(notes, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			show := func(path string) result {
				t.Helper()
				return d.ctl(t, "call", "cat", "show", "--workspace", d.ws, "--input", `{"path":"`+path+`"}`)
			}
			aheadSoFar := func() float64 {
				t.Helper()
				v, ok := fixture.MetricValue(d.metrics(t), "clihost_sandbox_zygote_ahead_total")
				if !ok {
					t.Fatal("no clihost_sandbox_zygote_ahead_total in the metrics")
				}
				return v
			}
			// Up to three rounds of 16 calls: a sandbox built ahead is used only while the host's
			// mount table is as it was, and other packages' tests running beside this one mount
			// and unmount (a round then finds few); every call of every round is checked.
			for round := 0; ; round++ {
				before := aheadSoFar()
				for i := range 8 {
					n := string(rune('a' + round*8 + i))
					write(filepath.Join(notes, "note.txt"), "note "+n+"\n")
					if r := show("notes/note.txt"); r.code != 0 || !strings.Contains(r.stdout, "note "+n) {
						t.Fatalf("call %d read %q (exit %d, stderr %s), want the note written before it", i, r.stdout, r.code, r.stderr)
					}
					time.Sleep(100 * time.Millisecond) // the agent's model takes its turn
					write(env, "TOKEN=secret-"+n+"\n")
					if r := show(".env"); strings.Contains(r.stdout, "TOKEN") {
						t.Fatalf("call %d read the denied .env replaced before it: %q", i, r.stdout)
					}
					time.Sleep(100 * time.Millisecond)
				}
				ahead := aheadSoFar() - before
				t.Logf("round %d: %v of 16 calls ran in a sandbox built ahead", round+1, ahead)
				if ahead >= 4 {
					break
				}
				if round == 2 {
					t.Fatalf("in each of 3 rounds of 16 paced calls at most %v ran in a sandbox built ahead, want most:\n%s", ahead, d.metrics(t))
				}
			}
		})
	}
}
