package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// aged shortens listingMargin for a test and waits until what the test wrote so far is older than
// it, so that the next walk keeps its listings (the real margin is two seconds).
func aged(t *testing.T) {
	t.Helper()
	old := listingMargin
	listingMargin = 30 * time.Millisecond
	t.Cleanup(func() { listingMargin = old })
	time.Sleep(2 * listingMargin)
}

// snapKept ages what the test wrote so far (see aged) and takes the snapshot twice: the second
// walk already uses the listings the first kept, as a call's would.
func (g *guardFixture) snapKept() {
	g.t.Helper()
	aged(g.t)
	g.snap()
	g.snap()
}

// keptSince returns a function reporting how many listings walks used instead of reading since.
func keptSince() func() int64 {
	start := listings.hits.Load()
	return func() int64 { return listings.hits.Load() - start }
}

// TestGitGuardKeptListingsSeeEveryChange attacks the listings the git rule keeps between walks: a
// call that adds a git directory, a gitfile or a hook to a folder whose listing was kept, in every
// way a folder's entries can change (create, rename in, rename over, link, a folder removed and
// made again, likely with the same inode), and then sets the folder's times back, must still be
// caught by the check after it. The test fails unless the check used kept listings.
func TestGitGuardKeptListingsSeeEveryChange(t *testing.T) {
	g := newGuard(t)
	g.repo(".git", initConfig)
	for _, d := range []string{"create", "renamein", "renameover/old", "link", "remade", "deep/a/b/c", "gitfile", "stay/x/y"} {
		g.write(d+"/file", "x", 0o644)
	}
	g.write("spare/.git/HEAD", "x", 0o644) // only to be moved in
	g.write("spare-file", "gitdir: ../nowhere\n", 0o644)
	aged(t)
	g.snap() // keeps the listings

	stamp := func(rel string) {
		old := time.Unix(1_000_000_000, 0)
		must(t, os.Chtimes(g.path(rel), old, old)) // mtime back; the kernel still moves ctime
	}
	// The call.
	g.repo("create/.git", initConfig)
	g.write("create/.git/hooks/pre-commit", "#!/bin/sh\n", 0o755)
	stamp("create")
	g.repo("elsewhere/.git", initConfig)
	g.write("elsewhere/.git/hooks/post-checkout", "#!/bin/sh\n", 0o755)
	must(t, os.Rename(g.path("elsewhere/.git"), g.path("renamein/.git")))
	stamp("renamein")
	g.repo("new/.git", initConfig)
	g.write("new/.git/hooks/pre-push", "#!/bin/sh\n", 0o755)
	must(t, os.RemoveAll(g.path("renameover/old")))
	must(t, os.Rename(g.path("new"), g.path("renameover/old")))
	stamp("renameover")
	must(t, os.Link(g.path("spare-file"), g.path("link/.git")))
	stamp("link")
	must(t, os.RemoveAll(g.path("remade")))
	g.repo("remade/.git", initConfig)
	g.write("remade/.git/hooks/pre-rebase", "#!/bin/sh\n", 0o755)
	stamp("remade")
	g.repo("deep/a/b/c/.git", initConfig)
	g.write("deep/a/b/c/.git/hooks/commit-msg", "#!/bin/sh\n", 0o755)
	stamp("deep/a/b/c")
	g.write("gitfile/.git", "gitdir: /nowhere\n", 0o644)
	stamp("gitfile")

	kept := keptSince()
	found := g.check()
	want := []string{"create/.git/hooks/pre-commit", "deep/a/b/c/.git/hooks/commit-msg", "gitfile/.git", "link/.git",
		"remade/.git/hooks/pre-rebase", "renamein/.git/hooks/post-checkout", "renameover/old/.git/hooks/pre-push"}
	if got := keys(found); !slices.Equal(got, want) {
		t.Errorf("neutralised %q, want %q", got, want)
	}
	if kept() == 0 {
		t.Fatal("the check read every folder again: the kept listings were not used, so this test tested nothing")
	}
}

// TestKeptListingsOnlyOfOldFolders checks that a folder changed within listingMargin of the walk
// is read again by the next one (a change in the same clock tick may leave its ctime as it was),
// and that one left alone is not.
func TestKeptListingsOnlyOfOldFolders(t *testing.T) {
	dir := realTemp(t)
	write(t, filepath.Join(dir, "old/f"), "", 0o644)
	aged(t)
	write(t, filepath.Join(dir, "young/f"), "", 0o644)
	walk := func() {
		p := &Policy{Writable: []string{dir}}
		if err := p.SnapshotGit(0); err != nil {
			t.Fatal(err)
		}
	}
	walk()
	kept := keptSince()
	walk()
	// old/ is kept; the root and young/ changed within the margin before the first walk.
	if n := kept(); n != 1 {
		t.Errorf("the second walk used %d kept listings, want 1 (old/ only)", n)
	}
}

// TestCompileSeesGitDirsAddedToKeptFolders checks the compile's search for nested git
// directories through kept listings: one added after a first compile is masked by the next.
func TestCompileSeesGitDirsAddedToKeptFolders(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "src/pkg/f.go"), "package p\n", 0o644)
	in := f.input(fsSandbox(nil, []string{"./**"}, nil))
	aged(t)
	f.compile(in)
	write(t, filepath.Join(f.ws, "src/pkg/.git/HEAD"), "ref: refs/heads/main\n", 0o644)
	kept := keptSince()
	wantIn(t, "Deny", f.compile(in).Deny, filepath.Join(f.ws, "src/pkg/.git/hooks"), filepath.Join(f.ws, "src/pkg/.git/config"))
	if kept() == 0 {
		t.Fatal("the second compile read every folder again: the kept listings were not used")
	}
}

func TestStampedLocally(t *testing.T) {
	for _, c := range []struct {
		fs   int64
		want bool
	}{
		{unix.EXT4_SUPER_MAGIC, true}, {unix.XFS_SUPER_MAGIC, true}, {unix.BTRFS_SUPER_MAGIC, false}, {unix.TMPFS_MAGIC, true},
		{unix.NFS_SUPER_MAGIC, false}, {unix.FUSE_SUPER_MAGIC, false}, {unix.OVERLAYFS_SUPER_MAGIC, false}, {unix.CIFS_SUPER_MAGIC, false},
	} {
		if got := stampedLocally(c.fs); got != c.want {
			t.Errorf("stampedLocally(%#x) = %v, want %v", c.fs, got, c.want)
		}
	}
}

// TestGitGuardUnchangedLeavesStillJudgeContents attacks the walks' shortcut for folders whose kept
// listing holds no folder (they are not opened): a call that changes, in place, a file the git rule
// judges by content — a .git gitfile, a runConfig, a per-user git config — in such a folder leaves
// the folder's ctime as it was, and the check after it must judge the file all the same. The test
// fails unless the shortcut was taken for the folders around them.
func TestGitGuardUnchangedLeavesStillJudgeContents(t *testing.T) {
	g := newGuard(t)
	g.repo(".git", initConfig)
	g.repo("target/.git", initConfig)
	g.write("a/.git", "gitdir: ../target/.git\n", 0o644)
	g.write("pkg/.npmrc", "registry=https://registry.npmjs.org/\n", 0o644)
	g.write("home/.gitconfig", "[user]\n\tname = n\n", 0o644)
	for i := range 20 {
		g.write(fmt.Sprintf("leaves/l%02d/f", i), "x", 0o644)
	}
	g.p.gitGlobal = []string{g.path("home/.gitconfig")}
	g.snapKept()

	// In place: same names, so no folder's ctime moves.
	for rel, content := range map[string]string{
		"a/.git":          "gitdir: /nowhere\n",
		"pkg/.npmrc":      "script-shell=/x\n",
		"home/.gitconfig": "[user]\n\tname = n\n[core]\n\tfsmonitor = x\n",
	} {
		rewriteInPlace(t, g.path(rel), content)
	}
	kept := keptSince()
	found := g.check()
	if got, want := keys(found), []string{"a/.git", "home/.gitconfig", "pkg/.npmrc"}; !slices.Equal(got, want) {
		t.Errorf("neutralised %q, want %q", got, want)
	}
	if kept() < 20 {
		t.Fatalf("the check used %d kept listings: the unchanged leaves were read again, so this tested nothing", kept())
	}
}
