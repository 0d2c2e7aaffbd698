package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo makes a repository with one commit in a temporary folder and returns a function that
// runs git there.
func gitRepo(t *testing.T) (string, func(...string) string) {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_COMMITTER_DATE=2026-11-26T07:00:00Z", "GIT_AUTHOR_DATE=2026-11-26T07:00:00Z")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "f")
	git("commit", "-q", "-m", "one")
	return dir, git
}

// TestGitVersion: the version names the commit as Go's module versions do, and dpkg orders the
// versions of a release's history as Go does: untagged < the tag < a later commit < the next tag.
func TestGitVersion(t *testing.T) {
	dir, git := gitRepo(t)
	hash := git("rev-parse", "HEAD")[:12]
	version := func() string {
		t.Helper()
		v, err := gitVersion(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkVersion(v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	untagged := version()
	if untagged != "0.0.0~20261126070000."+hash {
		t.Errorf("untagged: %q", untagged)
	}
	git("tag", "v1.4.2")
	if v := version(); v != "1.4.2" {
		t.Errorf("on tag v1.4.2: %q", v)
	}
	git("commit", "-q", "--allow-empty", "-m", "two")
	after := version()
	if want := "1.4.3~0.20261126070000." + git("rev-parse", "HEAD")[:12]; after != want {
		t.Errorf("after v1.4.2: %q, want %q", after, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	dirty := version()
	if dirty != after+"+dirty" {
		t.Errorf("with an uncommitted change: %q", dirty)
	}
	if _, err := exec.LookPath("dpkg"); err == nil {
		order := []string{untagged, "1.4.2", after, dirty, "1.4.3"}
		for i := 1; i < len(order); i++ {
			if err := exec.Command("dpkg", "--compare-versions", order[i-1], "lt", order[i]).Run(); err != nil {
				t.Errorf("dpkg does not order %s before %s", order[i-1], order[i])
			}
		}
	}
	git("tag", "release-candidate")
	if v := version(); v != dirty {
		t.Errorf("a tag that is not vX.Y.Z changed the version: %q", v)
	}
}

// TestCheckVersion refuses versions either format would refuse or misread.
func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"", "v1.0.0", "1.0-1", "1:2.0", "1.0 beta", "1.0/../x", "1.0\n"} {
		if checkVersion(v) == nil {
			t.Errorf("checkVersion(%q) accepted it", v)
		}
	}
	for _, v := range []string{"1.2.3", "1.2.3~test", "0.0.0~20261126070000.abcdef012345+dirty"} {
		if err := checkVersion(v); err != nil {
			t.Errorf("checkVersion(%q): %v", v, err)
		}
	}
}

// TestPackagedUnit: the packaged unit runs /usr/bin/clihostd and keeps every setting of
// deploy/clihostd.service; a unit whose ExecStart no longer runs /usr/local/bin/clihostd is refused.
func TestPackagedUnit(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	p, err := packagedUnit(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	orig, _ := os.ReadFile(filepath.Join(root, "deploy", "clihostd.service"))
	if strings.Contains(string(got), "/usr/local/bin") || !strings.Contains(string(got), "\nExecStart=/usr/bin/clihostd ") {
		t.Errorf("packaged unit:\n%s", got)
	}
	for _, l := range strings.Split(string(orig), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") && !strings.Contains(string(got), strings.ReplaceAll(l, "/usr/local/bin/", "/usr/bin/")) {
			t.Errorf("the packaged unit lost %q", l)
		}
	}
	fake := t.TempDir()
	if err := os.MkdirAll(filepath.Join(fake, "deploy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fake, "deploy", "clihostd.service"), []byte("[Service]\nExecStart=/opt/clihostd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := packagedUnit(fake, t.TempDir()); err == nil {
		t.Errorf("a unit that does not run /usr/local/bin/clihostd was packaged")
	}
}
