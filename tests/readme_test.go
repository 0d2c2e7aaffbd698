package tests

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/internal/fixture"
)

// quickStart returns the code blocks of README.md's "Quick start" section, each as its command
// lines (comments and blank lines dropped).
func quickStart(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Quick start\n")
	if !ok {
		t.Fatal("README.md has no Quick start section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks [][]string
	var cur []string
	in := false
	for line := range strings.SplitSeq(section, "\n") {
		switch {
		case strings.HasPrefix(line, "```") && !in:
			in, cur = true, []string{}
		case strings.HasPrefix(line, "```"):
			in = false
			blocks = append(blocks, cur)
		case in:
			if cmd := strings.TrimSpace(stripComment(line)); cmd != "" {
				cur = append(cur, cmd)
			}
		}
	}
	return blocks
}

// stripComment drops a trailing "  # comment" (outside quotes, which the quick start does not
// put a # in).
func stripComment(line string) string {
	if i := strings.Index(line, " #"); i >= 0 {
		return line[:i]
	}
	return line
}

// trackedCopy copies the files git tracks in the repository into a new directory: what a fresh
// clone has (no untracked package.json or build output).
func trackedCopy(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output()
	if err != nil {
		fixture.Missing(t, "not a git checkout: %v", err)
	}
	dst := t.TempDir()
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join("..", rel)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the working tree, or a symlink: not needed by the quick start
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		copyFile(t, src, filepath.Join(dst, rel), st.Mode().Perm())
	}
	return dst
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadmeQuickStart runs README.md's quick start as printed, in a copy of the repository's
// tracked files: the daemon (the built clihostd for `go run ./cmd/clihostd`, without the sandbox
// helper, as go run has none) on its defaults with a fresh HOME, then each clihostctl command of
// the second block from the repository root. Each must succeed; the call must return a value.
// The one deviation: the daemon listens on a free port, not 8931, so that parallel runs do not
// collide (nothing in the quick start uses the port).
func TestReadmeQuickStart(t *testing.T) {
	fixture.Need(t, "jq")
	blocks := quickStart(t)
	if len(blocks) != 2 {
		t.Fatalf("the quick start has %d code blocks, want 2 (set-up; commands from another terminal): %q", len(blocks), blocks)
	}
	if want := []string{"go run ./cmd/clihostd", "go test ./..."}; strings.Join(blocks[0], "\n") != strings.Join(want, "\n") {
		t.Fatalf("the set-up commands are %q, want exactly %q", blocks[0], want)
	}
	root := trackedCopy(t)
	fixture.GiveToAgent(t, root)
	home := t.TempDir()
	env := []string{"PATH=" + systemPath, "HOME=" + home, "CLIHOST_BUNDLES="}

	daemon := exec.Command(bin.daemon, "--http", "127.0.0.1:0")
	daemon.Dir, daemon.Env = root, env
	stderr, err := daemon.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	fixture.Start(t, daemon)
	ready := make(chan bool, 1)
	helperNote := false // the daemon says, before it is ready, that it runs without the helper
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "no clihost-sandbox helper beside clihostd") {
				helperNote = true
			}
			if strings.Contains(sc.Text(), "clihostd ready") {
				ready <- true
			}
		}
		close(ready)
	}()
	if !<-ready {
		t.Fatal("clihostd exited before it was ready")
	}
	if !helperNote {
		t.Error("clihostd started without the clihost-sandbox helper beside it and did not say so (each call is slower: the README and the log must tell)")
	}

	seen := map[string]bool{}
	for _, line := range blocks[1] {
		words, err := argv.Split(line)
		if err != nil || words[0] != "clihostctl" {
			t.Fatalf("quick start command %q: not a clihostctl command (%v)", line, err)
		}
		cmd := exec.Command(bin.ctl, words[1:]...)
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("%s: %v\n%s%s", line, err, out, stderr)
		}
		seen[words[1]] = true
		checkQuickStartOutput(t, line, words[1], out)
	}
	for _, want := range []string{"status", "install", "call", "token"} {
		if !seen[want] {
			t.Errorf("the quick start no longer runs clihostctl %s", want)
		}
	}
}

// checkQuickStartOutput checks what a quick-start command printed.
func checkQuickStartOutput(t *testing.T, line, verb string, out []byte) {
	t.Helper()
	switch verb {
	case "status":
		if !strings.Contains(string(out), "jq@1") {
			t.Fatalf("%s does not list jq:\n%s", line, out)
		}
	case "call":
		var env struct {
			OK    bool `json:"ok"`
			Value any  `json:"value"`
		}
		if err := json.Unmarshal(out, &env); err != nil || !env.OK || env.Value == nil || env.Value == "" {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	case "token":
		if !regexp.MustCompile(`^[0-9a-f]{64}\n?$`).Match(out) {
			t.Fatalf("%s printed %q, not a token", line, out)
		}
	}
}
