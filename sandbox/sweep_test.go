package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSweepRemovesWhatTheCallCreatedAtAbsentDenies(t *testing.T) {
	f := newFixture(t)
	outside := realTemp(t)
	write(t, filepath.Join(outside, ".git/hooks/pre-commit"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(outside, "tasks.json"), "{}", 0o644)
	p := f.compile(f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil)))
	for _, rel := range []string{".git/hooks", ".git/config", ".vscode", ".idea"} {
		wantIn(t, "Absent", p.Absent, filepath.Join(f.ws, rel))
	}

	// What a call might leave behind: a new repository's hook, an editor task directory that is a
	// symbolic link out of the workspace, and a .idea that is a plain file.
	write(t, filepath.Join(f.ws, ".git/hooks/post-checkout"), "#!/bin/sh\nevil\n", 0o755)
	write(t, filepath.Join(f.ws, ".git/HEAD"), "ref: refs/heads/main\n", 0o644)
	if err := os.Symlink(outside, filepath.Join(f.ws, ".vscode")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.ws, ".idea"), "x", 0o644)
	removed, _, err := Sweep(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(f.ws, ".git/hooks"), filepath.Join(f.ws, ".idea"), filepath.Join(f.ws, ".vscode")}
	slices.Sort(removed)
	if !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	for _, p := range want {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	// Only the link went, never what it pointed to; the rest of the new repository stays.
	for _, p := range []string{filepath.Join(outside, "tasks.json"), filepath.Join(f.ws, ".git/HEAD")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestSweepNeverFollowsALinkOutOfTheWorkspace(t *testing.T) {
	f := newFixture(t)
	outside := realTemp(t)
	hook := filepath.Join(outside, ".git/hooks/pre-commit")
	write(t, hook, "#!/bin/sh\n", 0o755)
	p := f.compile(f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil)))
	// The call replaced the absent .git with a link to another repository: ws/.git/hooks now
	// resolves outside the workspace, and must not be removed there.
	if err := os.Symlink(filepath.Join(outside, ".git"), filepath.Join(f.ws, ".git")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Sweep(p); err != nil {
		t.Logf("Sweep: %v", err)
	}
	if _, err := os.Stat(hook); err != nil {
		t.Fatalf("a hook outside the workspace was removed through a link: %v", err)
	}
}

func TestSweepLeavesANewRepositoryToTheGitRule(t *testing.T) {
	f := newFixture(t)
	p := f.compile(f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil)))
	if err := p.SnapshotGit(0); err != nil {
		t.Fatal(err)
	}
	// `git init` in the workspace during the call, and an editor task file.
	write(t, filepath.Join(f.ws, ".git/HEAD"), "ref: refs/heads/main\n", 0o644)
	write(t, filepath.Join(f.ws, ".git/config"), "[core]\n\tbare = false\n", 0o644)
	write(t, filepath.Join(f.ws, ".git/hooks/pre-commit.sample"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(f.ws, ".git/hooks/pre-commit"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(f.ws, ".vscode/tasks.json"), "{}", 0o644)
	removed, git, err := Sweep(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(f.ws, ".vscode")}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	if len(git) != 1 || git[0].Path != filepath.Join(f.ws, ".git/hooks/pre-commit") {
		t.Errorf("git findings %+v", git)
	}
	for _, rel := range []string{".git/config", ".git/hooks/pre-commit.sample"} {
		if _, err := os.Stat(filepath.Join(f.ws, rel)); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
}

// TestSweepRemovesAReplacedDenyPath: a deny path that existed at Compile (masked in the sandbox)
// but was removed while the call ran (the mask goes with its mount point) and made again is
// removed after the call; one that is still the same directory is left alone.
func TestSweepRemovesAReplacedDenyPath(t *testing.T) {
	f := newFixture(t)
	mkdir(t, filepath.Join(f.ws, ".vscode"))
	write(t, filepath.Join(f.ws, ".idea/workspace.xml"), "<x/>", 0o644)
	p := f.compile(f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil)))
	wantNotIn(t, "Absent", p.Absent, filepath.Join(f.ws, ".vscode"))
	// Removed and made again (on ext4 the new directory usually gets the same inode number).
	if err := os.Remove(filepath.Join(f.ws, ".vscode")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.ws, ".vscode/tasks.json"), "{}", 0o644)
	write(t, filepath.Join(f.ws, ".idea/other.xml"), "<x/>", 0o644) // the user's own change
	removed, _, err := Sweep(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(f.ws, ".vscode")}; !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	if _, err := os.Stat(filepath.Join(f.ws, ".idea/other.xml")); err != nil {
		t.Errorf("the unchanged deny path's content: %v", err)
	}
}

// TestSweepNeverFollowsASwappedWritableRoot: the workspace's owner (outside the sandbox, after the
// call's processes exited) replaced the workspace itself with a symbolic link to another user's
// project. Sweep, which a root daemon runs as root, must not remove that project's .vscode (an
// absent deny path of the workspace at Compile): it refuses the changed root. Before the fix
// os.OpenRoot followed the link and RemoveAll took the other project's folder.
func TestSweepNeverFollowsASwappedWritableRoot(t *testing.T) {
	f := newFixture(t)
	victim := realTemp(t)
	task := filepath.Join(victim, ".vscode/tasks.json")
	write(t, task, "{}", 0o644)
	p := f.compile(f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil)))
	wantIn(t, "Absent", p.Absent, filepath.Join(f.ws, ".vscode"))
	moved := f.ws + ".moved"
	if err := os.Rename(f.ws, moved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.ws); os.Rename(moved, f.ws) })
	if err := os.Symlink(victim, f.ws); err != nil {
		t.Fatal(err)
	}
	removed, _, err := Sweep(p)
	if _, serr := os.Stat(task); serr != nil {
		t.Fatalf("Sweep removed %v through the swapped workspace (err %v): %s is gone", removed, err, task)
	}
	if err == nil || !strings.Contains(err.Error(), "changed") {
		t.Errorf("Sweep over a swapped writable root: err %v, want it to say the root changed", err)
	}
}

// TestLstatIDTellsARemadeDirectory: a directory removed and made again gets the same inode number
// on ext4 at once, and a birth time from the coarse clock that is often the same too; its
// generation differs, so the sweep sees it was replaced (an escape test left an unmasked
// .vscode/tasks.json about once in 300 racing calls before). /var/tmp here is ext4.
func TestLstatIDTellsARemadeDirectory(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "lstatid-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, ".vscode")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	first, ok := lstatID(p)
	if !ok {
		t.Fatal("lstatID failed")
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err == nil && fs.Type == unix.EXT4_SUPER_MAGIC && first.gen == 0 {
		t.Fatalf("on ext4 the generation is recorded: %+v", first)
	}
	for range 20 {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		again, _ := lstatID(p)
		if again == first {
			t.Fatalf("a directory made again has the identity of the removed one: %+v", again)
		}
		first = again
	}
}
