package escape

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// run runs a program as root for a test's setup and fails t on an error.
func run(t *testing.T, prog string, args ...string) {
	t.Helper()
	if out, err := exec.Command(prog, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %q: %v: %s", prog, args, err, out)
	}
}

// TestGitRuleBtrfsSnapshotSwap attacks the git rule's kept folder listings (sandbox/listings.go)
// from a call in a workspace on btrfs. Before the call, the workspace holds two snapshots A and S
// of one subvolume whose folder X was changed in both in the same clock tick (A/X gained y; S/X
// gained y and a .git with a pre-commit hook): one inode number, one ctime, other entries. The
// git rule's snapshot walk keeps A/X's listing; the call, as the agent, removes A and snapshots S
// in its place, which gets A's st_dev. A sweep that used the kept listing would not see A/X/.git
// and leave its hook for the owner's next commit.
func TestGitRuleBtrfsSnapshotSwap(t *testing.T) {
	s := newSuite(t)
	fixture.Need(t, "mkfs.btrfs", "btrfs", "mount", "umount")
	dir, err := os.MkdirTemp("/var/tmp", "clihost-btrfs-")
	must(t, err)
	must(t, os.Chmod(dir, 0o755))
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "ws")
	t.Cleanup(func() { exec.Command("umount", mnt).Run(); os.RemoveAll(dir) })
	must(t, os.WriteFile(img, nil, 0o600))
	must(t, os.Truncate(img, 200<<20))
	must(t, os.Mkdir(mnt, 0o755))
	run(t, "mkfs.btrfs", "-q", "-f", img)
	run(t, "mount", "-o", "loop", img, mnt)
	m := func(rel string) string { return filepath.Join(mnt, rel) }
	run(t, "btrfs", "-q", "subvolume", "create", m("base"))
	must(t, os.MkdirAll(m("base/X/sub"), 0o755))
	fixture.GiveToAgent(t, mnt) // before the snapshots: a chown moves ctimes
	same := false
	for try := 0; try < 50 && !same; try++ {
		a, sv := m("A"+strconv.Itoa(try)), m("S"+strconv.Itoa(try))
		run(t, "btrfs", "-q", "subvolume", "snapshot", m("base"), a)
		run(t, "btrfs", "-q", "subvolume", "snapshot", m("base"), sv)
		must(t, os.Mkdir(filepath.Join(a, "X/y"), 0o755))
		must(t, os.Mkdir(filepath.Join(sv, "X/y"), 0o755))
		must(t, os.Mkdir(filepath.Join(sv, "X/.git"), 0o755))
		var sa, ss unix.Stat_t
		must(t, unix.Stat(filepath.Join(a, "X"), &sa))
		must(t, unix.Stat(filepath.Join(sv, "X"), &ss))
		if same = sa.Ctim == ss.Ctim; same || try == 49 {
			must(t, os.Rename(a, m("A")))
			must(t, os.Rename(sv, m("S")))
		}
	}
	if !same { // the attack needs it; the sweep must catch the hook all the same
		t.Log("no two changes landed in the same clock tick in 50 tries: the swap is made with different ctimes")
	}
	hook := m("S/X/.git/hooks/pre-commit")
	must(t, os.MkdirAll(filepath.Dir(hook), 0o755))
	must(t, os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+filepath.Join(dir, "ran")+"\n"), 0o755))
	time.Sleep(2500 * time.Millisecond) // A/X's ctime is then old enough for its listing to be kept

	env, r := callEnv(t, s.h, "git", mnt, "btrfs-swap", m("A"), m("S"))
	allowed("").check(t, r)
	t.Logf("warnings: %q", env.Warnings)
	if _, err := os.Lstat(m("A/X/.git/hooks/pre-commit")); err == nil {
		t.Error("the hook the call planted in A/X/.git survived the sweep")
	}
	if !anyContains(env.Warnings, "A/X/.git/hooks/pre-commit") {
		t.Errorf("no warning names A/X/.git/hooks/pre-commit: %q", env.Warnings)
	}
}
