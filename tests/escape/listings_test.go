package escape

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// TestGitRuleBtrfsSnapshotSwap attacks the git rule's kept folder listings (sandbox/listings.go)
// from a call in a workspace on btrfs. Before the call, the workspace holds two snapshots A and S
// of one subvolume whose folder X was changed in both in the same clock tick (A/X gained y; S/X
// gained y and a .git with a pre-commit hook): one inode number, one ctime, other entries. The
// git rule's snapshot walk keeps A/X's listing; the call, as the agent, removes A and snapshots S
// in its place, which gets A's st_dev. A sweep that used the kept listing would not see A/X/.git
// and leave its hook for the owner's next commit.
func TestGitRuleBtrfsSnapshotSwap(t *testing.T) {
	s := newSuite(t)
	dir, err := os.MkdirTemp("/var/tmp", "clihost-btrfs-") // the agent must reach it: not a 0700 TempDir
	must(t, err)
	must(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	mnt := fixture.LoopMount(t, dir, "btrfs", 200<<20)
	m := func(rel string) string { return filepath.Join(mnt, rel) }
	fixture.BtrfsTwins(t, mnt, func() { fixture.GiveToAgent(t, mnt) })
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
