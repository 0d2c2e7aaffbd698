package buildinfo_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/buildinfo"
)

// TestBinariesNameRevision builds clihostctl and clihostd from this checkout with -buildvcs=true,
// as `go build` and `go install ./cmd/...` do, and checks that --version (and clihostctl version
// --json) name the checkout's revision and whether it was modified, not only "dev".
func TestBinariesNameRevision(t *testing.T) {
	src, rev, modified := checkout(t)
	dir := t.TempDir()
	build := exec.Command("go", "build", "-buildvcs=true", "-o", dir+"/", "./cmd/clihostctl", "./cmd/clihostd")
	build.Dir = src
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := rev[:12]
	if modified {
		want += ", modified"
	}
	for _, bin := range []string{"clihostctl", "clihostd"} {
		out, err := exec.Command(filepath.Join(dir, bin), "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", bin, err)
		}
		line := string(out)
		if !strings.HasPrefix(line, bin+" dev ("+want+") built 20") || !strings.Contains(line, " go1.") || strings.Count(line, "\n") != 1 {
			t.Errorf("%s --version = %q, want %q and its time, toolchain and platform", bin, line, bin+" dev ("+want+") built …")
		}
	}
	out, err := exec.Command(filepath.Join(dir, "clihostctl"), "version", "--json").Output()
	if err != nil {
		t.Fatalf("clihostctl version --json: %v", err)
	}
	var info buildinfo.Info
	if err := json.Unmarshal(out, &info); err != nil || info.Revision != rev || info.Modified != modified || info.Time.IsZero() || info.Version != "dev" {
		t.Errorf("clihostctl version --json = %s (%v), want revision %s", out, err, rev)
	}
}

// checkout returns a git checkout of this module to build in, its revision and whether it has
// changes. The go command stamps VCS information only where .git is a directory, not in a linked
// worktree (where .git is a file): there, a shared clone of HEAD is built instead.
func checkout(t *testing.T) (dir, rev string, modified bool) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	dir = strings.TrimSpace(string(top))
	head, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	rev = strings.TrimSpace(string(head))
	if fi, err := os.Stat(filepath.Join(dir, ".git")); err == nil && fi.IsDir() {
		porcelain, err := exec.Command("git", "-C", dir, "status", "--porcelain").Output()
		if err != nil {
			t.Fatal(err)
		}
		return dir, rev, len(porcelain) > 0
	}
	clone := filepath.Join(t.TempDir(), "clihost")
	for _, args := range [][]string{{"clone", "-q", "--shared", "--no-checkout", dir, clone}, {"-C", clone, "checkout", "-q", rev}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return clone, rev, false
}
