package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCacheGitWorkTree: a tool that may write a git work tree (git's own tools, a formatter in a
// project) reuses its policy while nothing a compilation reads changed, and compiles afresh, with
// the new git directories masked, after each change that adds or moves one: a submodule's and a
// worktree's git directory made, a submodule checkout's .git file made and then rewritten in place
// to point elsewhere, hooks replaced by a link, the .git folder replaced by a link to another git
// directory, and that link pointed at a third. cacheCheck compares every policy with a compilation's.
func TestCacheGitWorkTree(t *testing.T) {
	f := newFixture(t)
	git := filepath.Join(f.ws, ".git")
	write(t, filepath.Join(git, "HEAD"), "ref: refs/heads/main\n", 0o644)
	write(t, filepath.Join(git, "config"), "[core]\n", 0o644)
	write(t, filepath.Join(git, "hooks", "pre-commit.sample"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(f.ws, "src", "main.go"), "package main\n", 0o644)
	// Git directories the changes below point to, made before the first call: each change must be
	// seen by what a compilation reads of the .git file or link itself.
	for _, other := range []string{"other", "real", "real2"} {
		write(t, filepath.Join(f.ws, other, "HEAD"), "0\n", 0o644)
	}
	in := f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil))
	c := NewCache()
	wantIn(t, "Deny", cacheCheck(t, c, in, "first call", false).Deny, filepath.Join(git, "hooks"), filepath.Join(git, "config"))
	cacheCheck(t, c, in, "second call", true)
	for _, ch := range []struct {
		name   string
		change func()
		masked []string
	}{
		{"a submodule's git directory made", func() {
			write(t, filepath.Join(git, "modules", "lib", "HEAD"), "0\n", 0o644)
			write(t, filepath.Join(git, "modules", "lib", "config"), "", 0o644)
			mkdir(t, filepath.Join(git, "modules", "lib", "hooks"))
		}, []string{filepath.Join(git, "modules", "lib", "hooks"), filepath.Join(git, "modules", "lib", "config")}},
		{"a second submodule's git directory made beside it", func() {
			write(t, filepath.Join(git, "modules", "lib2", "HEAD"), "0\n", 0o644)
			write(t, filepath.Join(git, "modules", "lib2", "config"), "", 0o644)
		}, []string{filepath.Join(git, "modules", "lib2", "config")}},
		{"a worktree's git directory made", func() {
			write(t, filepath.Join(git, "worktrees", "w", "HEAD"), "0\n", 0o644)
			write(t, filepath.Join(git, "worktrees", "w", "config.worktree"), "", 0o644)
		}, []string{filepath.Join(git, "worktrees", "w", "config.worktree")}},
		{"a submodule checkout's .git file made", func() {
			write(t, filepath.Join(f.ws, "lib", ".git"), "gitdir: ../.git/modules/lib\n", 0o644)
		}, []string{filepath.Join(git, "modules", "lib", "hooks")}},
		{"the .git file rewritten in place to point elsewhere", func() {
			rewriteInPlace(t, filepath.Join(f.ws, "lib", ".git"), "gitdir: ../other/\n\n\n\n\n\n\n")
		}, []string{filepath.Join(f.ws, "other", "hooks"), filepath.Join(f.ws, "other", "config")}},
		{"hooks replaced by a link", func() {
			if err := os.RemoveAll(filepath.Join(git, "hooks")); err != nil {
				t.Fatal(err)
			}
			mkdir(t, filepath.Join(f.ws, "elsewhere"))
			symlink(t, filepath.Join(f.ws, "elsewhere"), filepath.Join(git, "hooks"))
		}, []string{filepath.Join(f.ws, "elsewhere")}},
		{".git replaced by a link to another git directory", func() {
			if err := os.Rename(git, filepath.Join(f.ws, "old")); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Join(f.ws, "real"), git)
		}, []string{filepath.Join(f.ws, "real", "hooks"), filepath.Join(f.ws, "real", "config")}},
		{"the .git link pointed at a third git directory (renamed over: the folder's entries stay)", func() {
			symlink(t, filepath.Join(f.ws, "real2"), filepath.Join(f.ws, "next"))
			if err := os.Rename(filepath.Join(f.ws, "next"), git); err != nil {
				t.Fatal(err)
			}
		}, []string{filepath.Join(f.ws, "real2", "hooks"), filepath.Join(f.ws, "real2", "config")}},
	} {
		ch.change()
		wantIn(t, "Deny after "+ch.name, cacheCheck(t, c, in, ch.name, false).Deny, ch.masked...)
		cacheCheck(t, c, in, ch.name+", then again", true)
	}
}

// TestCacheGitLinkToNowhere: a .git link whose target does not exist masks nothing, and its policy
// is reused only until the target appears as a git directory, which must then be masked.
func TestCacheGitLinkToNowhere(t *testing.T) {
	f := newFixture(t)
	target := filepath.Join(f.home, "later") // outside the writable folder: no listing of it is asked
	symlink(t, target, filepath.Join(f.ws, "sub", ".git"))
	in := f.input(fsSandbox(nil, []string{"./**"}, nil))
	c := NewCache()
	cacheCheck(t, c, in, "first call", false)
	cacheCheck(t, c, in, "second call", true)
	// Made elsewhere and renamed into place: the link's folder's entries stay the same.
	write(t, filepath.Join(f.home, "made", "HEAD"), "0\n", 0o644)
	if err := os.Rename(filepath.Join(f.home, "made"), target); err != nil {
		t.Fatal(err)
	}
	wantIn(t, "Deny", cacheCheck(t, c, in, "the target made", false).Deny, filepath.Join(target, "hooks"))
	cacheCheck(t, c, in, "the target made, then again", true)
}

// TestNestedGitDirsAsTheGlob: nestedGitDirs, the walk that finds a git directory's submodule and
// worktree git directories, finds what the glob it replaced ({modules,worktrees}/**/HEAD, through
// expand) found, on trees with HEAD at every depth, HEAD as a folder, links where folders are, and
// folders that hold other git directories.
func TestNestedGitDirsAsTheGlob(t *testing.T) {
	for name, files := range map[string][]string{
		"none":                {"HEAD", "objects/ab/cd"},
		"modules":             {"modules/a/HEAD", "modules/b/c/HEAD", "modules/b/c/modules/d/HEAD"},
		"worktrees":           {"worktrees/w1/HEAD", "worktrees/w2/HEAD", "worktrees/w2/logs/HEAD"},
		"HEAD at the top":     {"modules/HEAD", "worktrees/HEAD"},
		"HEAD a folder":       {"modules/x/HEAD/y"},
		"deep":                {"modules/a/b/c/d/e/f/HEAD"},
		"other names ignored": {"modules/a/HEADS", "objects/HEAD"},
	} {
		t.Run(name, func(t *testing.T) {
			root := realTemp(t)
			for _, rel := range files {
				write(t, filepath.Join(root, rel), "", 0o644)
			}
			compareNestedWithGlob(t, root)
		})
	}
	t.Run("links", func(t *testing.T) {
		root := realTemp(t)
		other := realTemp(t)
		write(t, filepath.Join(other, "x", "HEAD"), "", 0o644)
		write(t, filepath.Join(root, "worktrees", "real", "HEAD"), "", 0o644)
		symlink(t, other, filepath.Join(root, "modules"))
		symlink(t, filepath.Join(other, "x"), filepath.Join(root, "worktrees", "link"))
		compareNestedWithGlob(t, root)
	})
}

// compareNestedWithGlob fails when nestedGitDirs and the glob find other folders under root.
func compareNestedWithGlob(t *testing.T, root string) {
	t.Helper()
	c := &compiler{budget: DefaultDenyBudget, fs: newView(), notes: map[string]bool{}}
	var walked, globbed []string
	complete, err := c.nestedGitDirs(root, func(sub string) error {
		walked = append(walked, sub)
		return nil
	})
	if err != nil || !complete {
		t.Fatalf("nestedGitDirs: complete %v, %v", complete, err)
	}
	complete, err = c.expand(root, "{modules,worktrees}/**/HEAD", func(rel string) error {
		globbed = append(globbed, filepath.Join(root, filepath.Dir(rel)))
		return nil
	})
	if err != nil || !complete {
		t.Fatalf("the glob: complete %v, %v", complete, err)
	}
	for _, list := range [][]string{walked, globbed} {
		for i, p := range list {
			r, err := filepath.EvalSymlinks(p)
			if err != nil {
				t.Fatal(err)
			}
			list[i] = r
		}
		slices.Sort(list)
	}
	if !slices.Equal(slices.Compact(walked), slices.Compact(globbed)) {
		t.Errorf("nestedGitDirs found %q, the glob %q", walked, globbed)
	}
}

// TestGitSearchGoesPastAFolderItCannotRead: a writable folder holding a folder the search cannot
// list (here a path longer than PATH_MAX; on a host that is not root, one a tool made mode 000)
// and repositories besides: every repository is masked, the search reports itself incomplete, and
// the kept policy answers as a compilation does.
func TestGitSearchGoesPastAFolderItCannotRead(t *testing.T) {
	f := newFixture(t)
	var repos []string
	for i := range 12 {
		repo := filepath.Join(f.ws, fmt.Sprintf("r%02d", i))
		write(t, filepath.Join(repo, ".git", "HEAD"), "0\n", 0o644)
		repos = append(repos, filepath.Join(repo, ".git", "hooks"))
	}
	// The folder too deep to list must come before a repository in the folder's own order.
	for try := 0; ; try++ {
		name := fmt.Sprintf("deep%d", try)
		makeDeep(t, filepath.Join(f.ws, name))
		if before(t, f.ws, name, "r") {
			break
		}
		if try == 20 {
			t.Fatal("the deep folder never came before a repository in the listing")
		}
	}
	in := f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil))
	c := NewCache()
	p := cacheCheck(t, c, in, "first call", false)
	wantIn(t, "Deny", p.Deny, repos...)
	wantNote(t, p, "search for nested git directories stopped")
	cacheCheck(t, c, in, "second call", true)
}

// makeDeep makes dir and, under it, folders of 250-byte names nested past PATH_MAX, one level at
// a time (no single path names the deepest).
func makeDeep(t *testing.T, dir string) {
	t.Helper()
	mkdir(t, dir)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 250)
	for range 18 {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	t.Cleanup(func() { removeDeep(dir) })
}

// removeDeep removes the tree makeDeep made (os.RemoveAll cannot name its deepest folders).
func removeDeep(dir string) {
	name := strings.Repeat("d", 250)
	for {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return
		}
		parent := -1
		for {
			next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				break
			}
			if parent >= 0 {
				unix.Close(parent)
			}
			parent, fd = fd, next
		}
		unix.Close(fd)
		if parent < 0 {
			return
		}
		unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
		unix.Close(parent)
	}
}

// before reports whether the entry name comes before an entry starting with prefix in dir's own
// order (as a walk reads it, not sorted).
func before(t *testing.T, dir, name, prefix string) bool {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, e := range entries {
		if e.Name() == name {
			seen = true
		} else if seen && strings.HasPrefix(e.Name(), prefix) {
			return true
		}
	}
	return false
}

// TestGitfileThroughADanglingLinkOrAFile: a .git file whose gitdir runs through a dangling link is
// refused (creating the link's target later would point git at a folder no mask covers), one whose
// gitdir runs through a regular file names no git directory (git cannot use it either) and the
// compile goes on.
func TestGitfileThroughADanglingLinkOrAFile(t *testing.T) {
	f := newFixture(t)
	symlink(t, filepath.Join(f.ws, "nowhere"), filepath.Join(f.ws, "dangling"))
	write(t, filepath.Join(f.ws, "sub", ".git"), "gitdir: ../dangling/g\n", 0o644)
	in := f.input(fsSandbox(nil, []string{"./**"}, nil))
	if _, err := Compile(in); err == nil || !strings.Contains(err.Error(), "dangling") {
		t.Fatalf("a gitdir through a dangling link: %v, want a refusal naming it", err)
	}
	write(t, filepath.Join(f.ws, "file"), "x", 0o644)
	write(t, filepath.Join(f.ws, "sub", ".git"), "gitdir: ../file/g\n", 0o644)
	if _, err := Compile(in); err != nil {
		t.Fatalf("a gitdir through a file: %v, want the compile to go on", err)
	}
}

// TestCommondirOutsideTheWritableRoots: a worktree's git directory in the workspace whose common
// directory lies outside every writable root (a repository elsewhere, read-only to the tool) masks
// its own hooks and config but leaves that repository's as granted: the call cannot write them, and
// git in the worktree reads its config there.
func TestCommondirOutsideTheWritableRoots(t *testing.T) {
	f := newFixture(t)
	common := filepath.Join(f.home, "src", "proj.git")
	write(t, filepath.Join(common, "HEAD"), "0\n", 0o644)
	write(t, filepath.Join(common, "config"), "[core]\n", 0o644)
	wtgit := filepath.Join(f.ws, "wtgit")
	write(t, filepath.Join(wtgit, "HEAD"), "0\n", 0o644)
	write(t, filepath.Join(wtgit, "commondir"), common+"\n", 0o644)
	write(t, filepath.Join(f.ws, "wt", ".git"), "gitdir: ../wtgit\n", 0o644)
	p := f.compile(f.input(fsSandbox([]string{"./**", "~/src/**"}, []string{"./**"}, nil)))
	wantIn(t, "Deny", p.Deny, filepath.Join(wtgit, "hooks"), filepath.Join(wtgit, "config"))
	wantNotIn(t, "Deny", p.Deny, filepath.Join(common, "config"), filepath.Join(common, "hooks"))
}

// TestDenyWalkAsTheGlob: denyWalk, the recorded walk that expands a deny pattern **/NAME, masks
// what the glob walk (expand) masks wherever the glob completes, on trees with matches at every
// depth, matching folders and links, links to folders (not followed), dot folders, and a budget
// too small for the tree.
func TestDenyWalkAsTheGlob(t *testing.T) {
	root := realTemp(t)
	for _, rel := range []string{".env", "a/.env", "a/b/c/.env", ".hidden/.env", ".env.d/.env", "x/key.pem", "x/y/z.pem", "x/y/z.pem.bak", "x/pem"} {
		write(t, filepath.Join(root, rel), "", 0o644)
	}
	mkdir(t, filepath.Join(root, "d", ".env"))
	symlink(t, filepath.Join(root, "a"), filepath.Join(root, "linked"))
	symlink(t, "nowhere", filepath.Join(root, "x", "dangling.pem"))
	big := realTemp(t) // more entries than budget 1's walk reads (100)
	for i := range 150 {
		write(t, filepath.Join(big, "many", fmt.Sprintf("f%03d", i)), "", 0o644)
	}
	write(t, filepath.Join(big, ".env"), "", 0o644)
	compareDenyWalk(t, root, DefaultDenyBudget)
	compareDenyWalk(t, root, 1)
	compareDenyWalk(t, big, DefaultDenyBudget)
	compareDenyWalk(t, big, 1)
}

// compareDenyWalk fails when denyWalk and expand's glob disagree under root, with budget.
func compareDenyWalk(t *testing.T, root string, budget int) {
	t.Helper()
	for _, name := range []string{".env", "*.pem", "{.env,*.pem}", "[a-z]*"} {
		c := &compiler{budget: budget, fs: newView(), notes: map[string]bool{}}
		var walked, globbed []string
		walkDone, err := c.denyWalk(root, name, func(rel string) error { walked = append(walked, rel); return nil })
		if err != nil {
			t.Fatal(err)
		}
		globDone, err := c.expand(root, "**/"+name, func(rel string) error { globbed = append(globbed, rel); return nil })
		if err != nil {
			t.Fatal(err)
		}
		// The glob read each folder twice (for ** and for NAME): its bound comes at half the walk's,
		// so the walk may complete where the glob stopped (TestR22WalkBoundVsGlob), never less.
		if globDone && !walkDone {
			t.Errorf("**/%s, budget %d: the glob completes, the walk does not", name, budget)
			continue
		}
		slices.Sort(walked)
		slices.Sort(globbed)
		if globDone && !slices.Equal(walked, globbed) {
			t.Errorf("**/%s: the walk masks %q, the glob %q", name, walked, globbed)
		}
	}
}

// TestCacheDenyAtAnyDepth: a deny pattern **/.env (the AI CLIs' bundles') keeps its policy while the
// workspace's folders hold the same names, and masks a .env made deep in it at the next call.
func TestCacheDenyAtAnyDepth(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "src", "main.go"), "", 0o644)
	write(t, filepath.Join(f.ws, ".env"), "A=1", 0o600)
	in := f.input(fsSandbox([]string{"./**"}, nil, []string{"**/.env"}))
	c := NewCache()
	wantIn(t, "Deny", cacheCheck(t, c, in, "first call", false).Deny, filepath.Join(f.ws, ".env"))
	cacheCheck(t, c, in, "second call", true)
	write(t, filepath.Join(f.ws, "src", "deep", ".env"), "B=2", 0o600)
	wantIn(t, "Deny", cacheCheck(t, c, in, "a .env made two folders down", false).Deny, filepath.Join(f.ws, "src", "deep", ".env"))
	cacheCheck(t, c, in, "a .env made two folders down, then again", true)
}
