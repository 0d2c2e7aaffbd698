package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	fx "github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// r20Check compiles in through c, afresh, and afresh with no kept listing, fails the test when
// the three differ, and returns the fresh policy and whether c reused a kept one.
func r20Check(t *testing.T, c *Cache, in Input, step string) (*Policy, bool) {
	t.Helper()
	before := c.Reused()
	got, gotErr := c.Compile(in)
	reused := c.Reused() > before
	want, wantErr := Compile(in)
	var fresh *Policy
	var freshErr error
	freshListings(func() { fresh, freshErr = Compile(in) })
	if gotErr != nil || wantErr != nil || freshErr != nil {
		t.Fatalf("%s: errors: cache %v, compile %v, reading every folder %v", step, gotErr, wantErr, freshErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: the cache's policy (reused: %v) differs from a compilation's: %s", step, reused, policyDiff(got, want))
	}
	if !reflect.DeepEqual(fresh, want) {
		t.Errorf("%s: the policy compiled with kept listings differs from one reading every folder: %s", step, policyDiff(want, fresh))
	}
	return fresh, reused
}

// bindMount bind-mounts src on dst (both the test's own folders) and returns its unmount.
func bindMount(t *testing.T, src, dst string) func() {
	t.Helper()
	must(t, unix.Mount(src, dst, "", unix.MS_BIND, ""))
	done := false
	umount := func() {
		if !done {
			done = true
			must(t, unix.Unmount(dst, unix.MNT_DETACH))
		}
	}
	t.Cleanup(func() {
		if !done {
			unix.Unmount(dst, unix.MNT_DETACH)
		}
	})
	return umount
}

// TestR20BindMountOverWalkedFolder: a bind mount neither changes the ctime of the folder it covers
// nor that of its parent, so the walk's kept listings of both stay good; the walk must still see
// the mounted folder's entries. A repository mounted over a subfolder (and over a folder the walk
// took for a kept leaf) must be masked at the next call, and the policy once it is unmounted must
// again be the one a compilation returns; a folder of the same entries mounted over a leaf may
// reuse the kept policy.
func TestR20BindMountOverWalkedFolder(t *testing.T) {
	fx.NeedRoot(t)
	f := newFixture(t)
	outside := realTemp(t)
	write(t, filepath.Join(f.ws, "sub", "a"), "a", 0o644)
	write(t, filepath.Join(f.ws, "leaf", "a"), "a", 0o644)
	write(t, filepath.Join(f.ws, "leaf", "b"), "b", 0o644)
	write(t, filepath.Join(outside, "repo", "a"), "a", 0o644)
	mkdir(t, filepath.Join(outside, "repo", ".git", "hooks"))
	write(t, filepath.Join(outside, "repo", ".git", "config"), "", 0o644)
	write(t, filepath.Join(outside, "same", "a"), "a", 0o644)
	write(t, filepath.Join(outside, "same", "b"), "b", 0o644)
	in := f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil))
	aged(t)
	c := NewCache()
	for _, step := range []string{"first call", "second call (leaves kept)", "third call"} {
		r20Check(t, c, in, step)
	}
	if _, reused := r20Check(t, c, in, "fourth call"); !reused {
		t.Fatal("the unchanged workspace's policy is not reused: the test proves nothing")
	}

	umount := bindMount(t, filepath.Join(outside, "repo"), filepath.Join(f.ws, "sub"))
	p, _ := r20Check(t, c, in, "a repository mounted over sub")
	wantIn(t, "Deny", p.Deny, filepath.Join(f.ws, "sub", ".git", "hooks"), filepath.Join(f.ws, "sub", ".git", "config"))
	umount()
	r20Check(t, c, in, "sub unmounted")
	r20Check(t, c, in, "sub unmounted, again")

	umount = bindMount(t, filepath.Join(outside, "repo"), filepath.Join(f.ws, "leaf"))
	p, reused := r20Check(t, c, in, "a repository mounted over the kept leaf")
	if reused {
		t.Error("the policy kept while leaf was a leaf was reused with a repository mounted over it")
	}
	wantIn(t, "Deny", p.Deny, filepath.Join(f.ws, "leaf", ".git", "hooks"))
	umount()
	r20Check(t, c, in, "leaf unmounted")

	aged(t)
	r20Check(t, c, in, "same: kept")
	umount = bindMount(t, filepath.Join(outside, "same"), filepath.Join(f.ws, "leaf"))
	r20Check(t, c, in, "a folder of the same entries mounted over leaf")
	r20Check(t, c, in, "a folder of the same entries mounted over leaf, again")
	umount()
}

// TestR20KeptListingsRemountedImage attacks the key of the kept listings (device, inode, ctime)
// with a file system remounted after an offline edit. A loop device keeps its device number while
// its file changes; an ext4 image edited offline (debugfs, or the same disk on another machine)
// keeps every inode number, and an entry added offline does not move its folder's ctime (no kernel
// stamps it). Remounted, the folder has the key and ctime of its kept listing and other entries:
// a .git the compile's walk must find (masking its hooks), the git rule's walk must judge.
//
// A sandboxed tool cannot mount anything; the workspace's owner (a removable disk, a disk image
// mounted with udisks) can, between calls.
func TestR20KeptListingsRemountedImage(t *testing.T) {
	fx.NeedRoot(t)
	fx.Need(t, "mkfs.ext4", "debugfs", "losetup", "blockdev", "mount", "umount")
	f := newFixture(t)
	tmp := realTemp(t)
	img := filepath.Join(tmp, "disk.img")
	must(t, os.WriteFile(img, nil, 0o600))
	must(t, os.Truncate(img, 32<<20))
	fx.RunOK(t, "mkfs.ext4", "-q", img)
	out, err := execOut("losetup", "--find", "--show", img)
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	loop := string(out[:len(out)-1])
	t.Cleanup(func() { execOut("losetup", "-d", loop) })
	mnt := filepath.Join(f.ws, "disk")
	mkdir(t, mnt)
	mount := func() {
		must(t, unix.Mount(loop, mnt, "ext4", 0, ""))
	}
	umount := func() { must(t, unix.Unmount(mnt, 0)) }
	mount()
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	write(t, filepath.Join(mnt, "proj", "d", "x"), "x", 0o644)
	d := filepath.Join(mnt, "proj", "d")
	in := f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil))
	aged(t)
	c := NewCache()
	r20Check(t, c, in, "first call")
	r20Check(t, c, in, "second call")
	var before unix.Stat_t
	must(t, unix.Lstat(d, &before))

	// Between calls: unmounted, edited offline (through the loop device itself, so that its
	// cached blocks are the edited ones), mounted again on it.
	umount()
	for _, cmd := range []string{"mkdir /proj/d/.git", "mkdir /proj/d/.git/hooks", "write /dev/null /proj/d/.git/HEAD"} {
		if out, err := execOut("debugfs", "-w", "-R", cmd, loop); err != nil {
			t.Fatalf("debugfs %s: %v: %s", cmd, err, out)
		}
	}
	execOut("blockdev", "--flushbufs", loop)
	mount()
	var after unix.Stat_t
	must(t, unix.Lstat(d, &after))
	t.Logf("d before: dev %d ino %d ctime %v; after: dev %d ino %d ctime %v", before.Dev, before.Ino, before.Ctim, after.Dev, after.Ino, after.Ctim)
	if before.Dev != after.Dev || before.Ino != after.Ino || before.Ctim != after.Ctim {
		t.Skip("the remounted folder has another key or ctime: nothing to attack here")
	}
	if _, err := os.Lstat(filepath.Join(d, ".git", "hooks")); err != nil {
		t.Fatalf("the offline edit did not take: %v", err)
	}
	hooks := filepath.Join(d, ".git", "hooks")
	p, _ := r20Check(t, c, in, "the image edited offline and remounted")
	wantIn(t, "Deny (read every folder)", p.Deny, hooks)
	kept, err := Compile(in)
	must(t, err)
	if !slices.Contains(kept.Deny, hooks) {
		t.Errorf("a compilation using the kept listings does not mask %s: the kept listing of %s (same device, inode and ctime) hides the .git", hooks, d)
	}
	got, err := c.Compile(in)
	must(t, err)
	if !slices.Contains(got.Deny, hooks) {
		t.Errorf("Cache.Compile does not mask %s", hooks)
	}

	// The git rule: a hook the call writes in that repository must be judged after it.
	pol, err := Compile(in)
	must(t, err)
	must(t, pol.SnapshotGit(0))
	write(t, filepath.Join(hooks, "pre-commit"), "#!/bin/sh\necho owned\n", 0o755)
	_, found, err := Sweep(pol)
	if err != nil {
		t.Logf("sweep: %v", err)
	}
	if len(found) == 0 {
		t.Errorf("the hook written in %s after the snapshot was not found by the git rule", hooks)
	}
	t.Logf("git rule findings: %+v", found)
}

// execOut runs a program for a test's setup and returns its combined output.
func execOut(prog string, args ...string) ([]byte, error) {
	return exec.Command(prog, args...).CombinedOutput()
}

// policyDiff names what differs between two policies: Deny, Absent and Notes by entry, else all.
func policyDiff(a, b *Policy) string {
	only := func(x, y []string) []string {
		var out []string
		for _, e := range x {
			if !slices.Contains(y, e) {
				out = append(out, e)
			}
		}
		return out
	}
	s := ""
	for _, l := range []struct {
		name string
		x, y []string
	}{{"Deny", a.Deny, b.Deny}, {"Absent", a.Absent, b.Absent}, {"Notes", a.Notes, b.Notes}} {
		if x, y := only(l.x, l.y), only(l.y, l.x); len(x)+len(y) > 0 {
			s += fmt.Sprintf("\n %s only in the first: %q; only in the second: %q", l.name, x, y)
		}
	}
	if s == "" {
		s = fmt.Sprintf("\n first: %+v\n second: %+v", a, b)
	}
	return s
}
