package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/internal/mountinfo"
	"golang.org/x/sys/unix"
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

// TestOwnedOverlapSeesMountChanges: the mount table is read again for every check: a bind mount
// of a trusted folder made inside the workspace after a check that passed, moved elsewhere, then
// unmounted, is seen by each next check.
func TestOwnedOverlapSeesMountChanges(t *testing.T) {
	p, mount := mountTree(t, "ws/sub", "trusted", "away")
	sub, trusted, away := p[0], p[1], p[2]
	ws := filepath.Dir(sub)
	check := func(want bool, when string) {
		t.Helper()
		for range 2 { // twice: a second look must agree
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

// TestOwnedOverlapSeesMountsUnderChurn attacks the mount table's reading: a bind mount of the state
// directory made inside the workspace, or its unmount, must be seen by the very next check while
// other goroutines check other workspaces at once and other processes clone mount namespaces
// (the pool clones one per call) and mount in them. Each round mounts, checks (refused), unmounts,
// checks (accepted); a single check that judged by a table from before the change fails it.
func TestOwnedOverlapSeesMountsUnderChurn(t *testing.T) {
	p, _ := mountTree(t, "ws/sub", "state", "clean")
	sub, state, clean := p[0], p[1], p[2]
	ws := filepath.Dir(sub)
	t.Cleanup(func() { _ = unix.Unmount(sub, unix.MNT_DETACH) })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	churn := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					f()
				}
			}
		}()
	}
	churn(func() { // a process in a new mount namespace of its own, cloned from this one
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS}
		_ = cmd.Run()
	})
	churn(func() { // another process mounting and unmounting in its namespace
		_ = exec.Command("unshare", "-m", "sh", "-c", "mount -t tmpfs t /mnt && umount /mnt").Run()
	})
	churn(func() { // other calls checking their workspaces meanwhile
		if e := OwnedOverlap(clean, state); e != nil {
			t.Errorf("a workspace beside the state directory: %+v", e)
		}
	})
	defer func() { close(stop); wg.Wait() }()
	rounds := 1000
	if testing.Short() {
		rounds = 300
	}
	for i := range rounds {
		if err := unix.Mount(state, sub, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		if e := OwnedOverlap(ws, state); e == nil || e.Code != errcode.WorkspaceDenied {
			t.Fatalf("round %d: a workspace holding a bind mount of the state directory: %+v, want workspace_denied", i, e)
		}
		if err := unix.Unmount(sub, 0); err != nil {
			t.Fatal(err)
		}
		if e := OwnedOverlap(ws, state); e != nil {
			t.Fatalf("round %d: the bind mount undone: %+v, want accepted", i, e)
		}
	}
}

// TestOwnedOverlapSeesPropagatedMounts: a bind mount of the state directory made in a peer mount
// namespace, on a shared mount of this one, propagates into this namespace without this process
// doing anything; each next check must see it arrive (refused) and, unmounted by another peer,
// leave (accepted).
func TestOwnedOverlapSeesPropagatedMounts(t *testing.T) {
	fixture.Need(t, "unshare")
	p, _ := mountTree(t, "shared", "state")
	shared, state := p[0], p[1]
	if err := unix.Mount("t", shared, "tmpfs", 0, "mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(shared, unix.MNT_DETACH) })
	if err := unix.Mount("", shared, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(shared, "ws")
	sub := filepath.Join(ws, "sub")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	peer := func(script string) {
		t.Helper()
		if out, err := exec.Command("unshare", "-m", "--propagation", "unchanged", "sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("peer %q: %v %s", script, err, out)
		}
	}
	check := func(want bool, when string) {
		t.Helper()
		for range 2 { // twice: a second look must agree
			if e := OwnedOverlap(ws, state); (e != nil) != want {
				t.Fatalf("%s: OwnedOverlap = %+v, want refused %v", when, e, want)
			}
		}
	}
	check(false, "before any mount")
	peer("mount --bind " + state + " " + sub)
	check(true, "a bind mount of the state directory propagated in from a peer")
	peer("umount " + sub)
	check(false, "unmounted by another peer")
}

// TestOwnedOverlapSeesRenamedMountPoint: renaming a folder that holds a mount point moves the
// mount in /proc/self/mountinfo (its place is the folder's path now) without any mount namespace
// event. A bind mount of the state directory inside a folder refused as a workspace, the folder
// renamed: the new name must be refused at once, not accepted from a table kept from before.
func TestOwnedOverlapSeesRenamedMountPoint(t *testing.T) {
	p, _ := mountTree(t, "proj/sub", "state")
	sub, state := p[0], p[1]
	before := filepath.Dir(sub)
	after := filepath.Join(filepath.Dir(before), "renamed")
	if err := unix.Mount(state, sub, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = unix.Unmount(filepath.Join(before, "sub"), unix.MNT_DETACH)
		_ = unix.Unmount(filepath.Join(after, "sub"), unix.MNT_DETACH)
	})
	if e := OwnedOverlap(before, state); e == nil || e.Code != errcode.WorkspaceDenied {
		t.Fatalf("a workspace holding a bind mount of the state directory: %+v, want workspace_denied", e)
	}
	if err := os.Rename(before, after); err != nil {
		t.Fatal(err)
	}
	if e := OwnedOverlap(after, state); e == nil || e.Code != errcode.WorkspaceDenied {
		t.Fatalf("the same workspace renamed: %+v, want workspace_denied", e)
	}
}
