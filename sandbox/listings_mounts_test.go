package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	fx "github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// run runs a program for a test's setup and fails t on an error.
func run(t *testing.T, prog string, args ...string) {
	t.Helper()
	if out, err := exec.Command(prog, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %q: %v: %s", prog, args, err, out)
	}
}

// loopMount makes a file system of type fs (mkfs.fs) in a file of size bytes, mounts it and
// returns where.
func loopMount(t *testing.T, fs string, size int64) string {
	t.Helper()
	fx.NeedRoot(t)
	fx.Need(t, "mkfs."+fs, "mount", "umount")
	dir := realTemp(t)
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	must(t, os.WriteFile(img, nil, 0o600))
	must(t, os.Truncate(img, size))
	must(t, os.Mkdir(mnt, 0o755))
	run(t, "mkfs."+fs, "-q", "-f", img)
	run(t, "mount", "-o", "loop", img, mnt)
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	return mnt
}

// TestKeptListingsBtrfsSnapshots attacks the kept listings with btrfs snapshots, which a workspace
// owner may take of a subvolume they own (no capability; the sandbox filters no ioctl): a snapshot
// copies a folder with its inode number and ctime, and a new subvolume gets the anonymous st_dev
// a removed one freed. Two snapshots of one folder changed in the same clock tick are two folders
// with one inode number and one ctime and different entries; remove the one whose listing was
// kept and snapshot the other in its place, and the key and ctime match a listing of other entries.
func TestKeptListingsBtrfsSnapshots(t *testing.T) {
	fx.Need(t, "btrfs")
	mnt := loopMount(t, "btrfs", 200<<20)
	m := func(rel string) string { return filepath.Join(mnt, rel) }
	run(t, "btrfs", "-q", "subvolume", "create", m("base"))
	must(t, os.MkdirAll(m("base/X/sub"), 0o755))

	// Two lineages of X whose changes land in the same clock tick.
	same := false
	for try := 0; try < 50 && !same; try++ {
		a, s := m("A"+strconv.Itoa(try)), m("S"+strconv.Itoa(try))
		run(t, "btrfs", "-q", "subvolume", "snapshot", m("base"), a)
		run(t, "btrfs", "-q", "subvolume", "snapshot", m("base"), s)
		// S/X's entries are A/X's and .git: a walk using A/X's listing in S/X finds all it lists.
		must(t, os.Mkdir(filepath.Join(a, "X/y"), 0o755))
		must(t, os.Mkdir(filepath.Join(s, "X/y"), 0o755))
		must(t, os.Mkdir(filepath.Join(s, "X/.git"), 0o755))
		var sa, ss unix.Stat_t
		must(t, unix.Stat(filepath.Join(a, "X"), &sa))
		must(t, unix.Stat(filepath.Join(s, "X"), &ss))
		if same = sa.Ctim == ss.Ctim; same || try == 49 {
			write(t, filepath.Join(s, "X/.git/hooks/pre-commit"), "#!/bin/sh\n", 0o755)
			must(t, os.Rename(a, m("A")))
			must(t, os.Rename(s, m("S")))
		}
	}
	if !same { // the attack needs it; the sweep must catch the hook all the same
		t.Log("no two changes landed in the same clock tick in 50 tries: the swap is made with different ctimes")
	}
	aged(t)
	g := &guardFixture{t: t, ws: mnt, p: &Policy{}}
	g.snap() // keeps A/X's listing, if btrfs listings are kept
	var before unix.Stat_t
	must(t, unix.Stat(m("A/X"), &before))

	// The call: A goes (rmdir of an empty subvolume needs no capability), a snapshot of S takes its
	// place (and, likely, its st_dev).
	must(t, os.RemoveAll(m("A")))
	run(t, "btrfs", "-q", "subvolume", "snapshot", m("S"), m("A"))
	var after unix.Stat_t
	must(t, unix.Stat(m("A/X"), &after))
	t.Logf("A/X before: dev %d ino %d; after: dev %d ino %d; same ctime: %v", before.Dev, before.Ino,
		after.Dev, after.Ino, before.Ctim == after.Ctim)
	if found := g.check(); !slices.Contains(keys(found), "A/X/.git/hooks/pre-commit") {
		t.Errorf("the hook planted in A/X/.git survived the sweep; neutralised %q", keys(found))
	}
}

// TestKeptListingsNoneOnOverlayfs checks on a real overlay mount (over this machine's file system)
// that its folders' listings are not kept: overlayfs shows a layer's ctime, which a change in
// another layer does not move.
func TestKeptListingsNoneOnOverlayfs(t *testing.T) {
	fx.NeedRoot(t)
	dir := realTemp(t)
	lower, upper, work, mnt := filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "mnt")
	write(t, filepath.Join(lower, "d/f"), "", 0o644)
	for _, d := range []string{upper, work, mnt} {
		must(t, os.Mkdir(d, 0o755))
	}
	must(t, unix.Mount("overlay", mnt, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work))
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	aged(t)
	listed(t, filepath.Join(mnt, "d"))
	kept := keptSince()
	listed(t, filepath.Join(mnt, "d"))
	if n := kept(); n != 0 {
		t.Errorf("%d listings of overlayfs folders were kept", n)
	}
}
