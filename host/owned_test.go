package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/internal/mountinfo"
)

// TestOnFSBindMount: a folder under a bind mount is found on the file system and folder the mount
// shows, with mountinfo's escapes undone; the topmost mount of a point wins.
func TestOnFSBindMount(t *testing.T) {
	mounts := []mountEntry{
		{dev: "8:1", root: "/", point: "/"},
		{dev: "0:40", root: "/", point: "/tmp"},
		{dev: "8:1", root: "/var/lib/clihost", point: mountinfo.Unescape(`/home/a\040b/proj/state`)},
	}
	for p, want := range map[string][2]string{
		"/var/lib/clihost/bin":         {"8:1", "/var/lib/clihost/bin"},
		"/home/a b/proj/state/bin":     {"8:1", "/var/lib/clihost/bin"},
		"/home/a b/proj":               {"8:1", "/home/a b/proj"},
		"/tmp/x":                       {"0:40", "/x"},
		"/home/a b/proj/state-not/bin": {"8:1", "/home/a b/proj/state-not/bin"},
	} {
		if dev, rel := onFS(mounts, p); dev != want[0] || rel != want[1] {
			t.Errorf("onFS(%q) = %q %q, want %q %q", p, dev, rel, want[0], want[1])
		}
	}
}

// mountTree makes the folders of names under a new temporary folder and returns their paths, for
// tests that run mount(8) on them (as root), and a function running mount with args.
func mountTree(t *testing.T, names ...string) (paths []string, mount func(args ...string)) {
	t.Helper()
	fixture.NeedRoot(t)
	fixture.Need(t, "mount", "umount")
	dir := t.TempDir()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		t.Cleanup(func() { _ = exec.Command("umount", "-l", p).Run() })
	}
	return paths, func(args ...string) {
		t.Helper()
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Fatalf("mount %v: %v %s", args, err, out)
		}
	}
}

// TestOwnedOverlapSharesOneMountTable: the mount table read for the first trusted path (which it
// clears) serves the next one, whose folder is bind-mounted inside the workspace: the workspace is
// refused, and one not holding the mount is not.
func TestOwnedOverlapSharesOneMountTable(t *testing.T) {
	p, mount := mountTree(t, "ws/sub", "other", "trusted", "clean")
	sub, other, trusted, clean := p[0], p[1], p[2], p[3]
	ws := filepath.Dir(sub)
	mount("--bind", trusted, sub)
	if e := OwnedOverlap(ws, other, other+"-not-there", trusted); e == nil || e.Code != errcode.WorkspaceDenied {
		t.Fatalf("a workspace holding a bind mount of a trusted folder: %+v, want workspace_denied", e)
	}
	if e := OwnedOverlap(clean, other, other+"-not-there", trusted); e != nil {
		t.Fatalf("a workspace beside them: %+v", e)
	}
}

// TestOwnedOverlapSeesMountChanges: the mount table kept between calls (currentMounts) is read
// again after every change: a bind mount of a trusted folder made inside the workspace after a
// check that passed, moved elsewhere, then unmounted, is seen by each next check.
func TestOwnedOverlapSeesMountChanges(t *testing.T) {
	p, mount := mountTree(t, "ws/sub", "trusted", "away")
	sub, trusted, away := p[0], p[1], p[2]
	ws := filepath.Dir(sub)
	check := func(want bool, when string) {
		t.Helper()
		for range 2 { // the second look comes from the kept table
			if e := OwnedOverlap(ws, "", trusted); (e != nil) != want {
				t.Fatalf("%s: OwnedOverlap = %+v, want refused %v", when, e, want)
			}
		}
	}
	check(false, "before any mount")
	mount("--bind", trusted, sub)
	check(true, "a bind mount of the trusted folder inside the workspace")
	mount("--move", sub, away)
	check(false, "the bind mount moved out of the workspace")
	mount("--move", away, sub)
	check(true, "moved back in")
	if out, err := exec.Command("umount", sub).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	check(false, "unmounted")
}
