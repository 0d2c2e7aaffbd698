package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	fx "github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// loopMount makes a file system of type fs in a file of size bytes, mounts it and returns where.
func loopMount(t *testing.T, fs string, size int64) string {
	t.Helper()
	return fx.LoopMount(t, realTemp(t), fs, size)
}

// TestKeptListingsBtrfsSnapshots attacks the kept listings with btrfs snapshots, which a workspace
// owner may take of a subvolume they own (no capability; the sandbox filters no ioctl): a snapshot
// copies a folder with its inode number and ctime, and a new subvolume gets the anonymous st_dev
// a removed one freed. Two snapshots of one folder changed in the same clock tick are two folders
// with one inode number and one ctime and different entries; remove the one whose listing was
// kept and snapshot the other in its place, and the key and ctime match a listing of other entries.
func TestKeptListingsBtrfsSnapshots(t *testing.T) {
	mnt := loopMount(t, "btrfs", 200<<20)
	m := func(rel string) string { return filepath.Join(mnt, rel) }
	fx.BtrfsTwins(t, mnt, func() {})
	write(t, m("S/X/.git/hooks/pre-commit"), "#!/bin/sh\n", 0o755)
	aged(t)
	g := &guardFixture{t: t, ws: mnt, p: &Policy{}}
	g.snap() // keeps A/X's listing, if btrfs listings are kept
	var before unix.Stat_t
	must(t, unix.Stat(m("A/X"), &before))

	// The call: A goes (rmdir of an empty subvolume needs no capability), a snapshot of S takes its
	// place (and, likely, its st_dev).
	must(t, os.RemoveAll(m("A")))
	fx.RunOK(t, "btrfs", "-q", "subvolume", "snapshot", m("S"), m("A"))
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
