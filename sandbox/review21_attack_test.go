package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Review 21: attacks on the policy cache's support for git work trees (findGitDirs following a
// .git, readGitfile, nestedGitDirs, folderListing's kept listings by path).
//
// SAFETY: every file change goes through r21Env.root, an os.Root on the test's own temp folder
// (links the test plants are never followed out of it); mounts are made only on folders checked
// (lstat, no link) to lie inside it, and are undone by the test.

type r21Env struct {
	t              *testing.T
	base, ws, home string
	root           *os.Root
	f              *fixture
}

func newR21(t *testing.T) *r21Env {
	t.Helper()
	base := realTemp(t)
	root, err := os.OpenRoot(base)
	must(t, err)
	t.Cleanup(func() { root.Close() })
	f := newFixture(t)
	e := &r21Env{t: t, base: base, ws: filepath.Join(base, "ws"), home: filepath.Join(base, "home"), root: root, f: f}
	must(t, root.Mkdir("ws", 0o755))
	must(t, root.Mkdir("home", 0o755))
	f.ws, f.home = e.ws, e.home
	return e
}

// abs returns the absolute path of rel (relative to base).
func (e *r21Env) abs(rel string) string { return filepath.Join(e.base, rel) }

func (e *r21Env) write(rel, content string) {
	e.t.Helper()
	must(e.t, e.root.MkdirAll(filepath.Dir(rel), 0o755))
	e.root.RemoveAll(rel)
	must(e.t, e.root.WriteFile(rel, []byte(content), 0o644))
}

func (e *r21Env) mkdir(rel string) {
	e.t.Helper()
	must(e.t, e.root.MkdirAll(rel, 0o755))
}

func (e *r21Env) link(target, rel string) {
	e.t.Helper()
	must(e.t, e.root.MkdirAll(filepath.Dir(rel), 0o755))
	e.root.RemoveAll(rel)
	must(e.t, e.root.Symlink(target, rel))
}

func (e *r21Env) rename(from, to string) {
	e.t.Helper()
	must(e.t, e.root.Rename(from, to))
}

func (e *r21Env) remove(rel string) {
	e.t.Helper()
	must(e.t, e.root.RemoveAll(rel))
}

// rewrite rewrites rel in place (same inode) with content, and puts its atime and mtime back.
func (e *r21Env) rewrite(rel, content string) {
	e.t.Helper()
	var st unix.Stat_t
	must(e.t, unix.Lstat(e.abs(rel), &st)) // a path of ours: rel has no "..", base is real
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		e.t.Fatalf("%s is not a regular file", rel)
	}
	fh, err := e.root.OpenFile(rel, os.O_WRONLY|os.O_TRUNC, 0)
	must(e.t, err)
	_, err = fh.WriteString(content)
	must(e.t, err)
	must(e.t, fh.Close())
	must(e.t, e.root.Chtimes(rel, time.Unix(st.Atim.Unix()), time.Unix(st.Mtim.Unix())))
}

// gitDir makes a git directory at rel: HEAD, config, hooks/, objects/, refs/.
func (e *r21Env) gitDir(rel string) {
	e.t.Helper()
	e.write(filepath.Join(rel, "HEAD"), "ref: refs/heads/main\n")
	e.write(filepath.Join(rel, "config"), "[core]\n\tbare = false\n")
	e.mkdir(filepath.Join(rel, "hooks"))
	e.mkdir(filepath.Join(rel, "objects"))
	e.mkdir(filepath.Join(rel, "refs"))
}

// input is a tool that may read the workspace and ~, and write the workspace.
func (e *r21Env) input(budget int) Input {
	in := e.f.input(fsSandbox([]string{"./**", "~/**"}, []string{"./**"}, nil))
	in.DenyBudget = budget
	return in
}

// check compares the cache's policy with a compilation's and one reading every folder
// (r20Check), and fails when reuse is not as wanted (-1: either) or a mask in masked is missing.
func (e *r21Env) check(c *Cache, in Input, step string, reuse int, masked ...string) *Policy {
	e.t.Helper()
	p, reused := r20Check(e.t, c, in, step)
	if reuse >= 0 && reused != (reuse == 1) {
		e.t.Errorf("%s: reused %v, want %v", step, reused, reuse == 1)
	}
	for _, m := range masked {
		if !deniedIn(p, m) {
			e.t.Errorf("%s: %s is not masked", step, m)
		}
	}
	return p
}

// settled lets what is there now be kept (listings older than the margin), calls twice (the
// first may miss: a folder read at the last compilation is now a kept leaf) and wants the third
// call to reuse the kept policy.
func (e *r21Env) settled(c *Cache, in Input, step string) {
	e.t.Helper()
	time.Sleep(2 * listingMargin)
	e.check(c, in, step, -1)
	e.check(c, in, step+" (2)", -1)
	e.check(c, in, step+" (3)", 1)
}

// deniedIn reports whether p's Deny covers path.
func deniedIn(p *Policy, path string) bool {
	for _, d := range p.Deny {
		if within(path, d) {
			return true
		}
	}
	return false
}

// TestR21GitfileRewrittenInPlace: a submodule checkout's .git file rewritten in place to name
// another git directory, with the same size and its times put back, and with the folders' listings
// kept (nothing but the file's bytes changes).
func TestR21GitfileRewrittenInPlace(t *testing.T) {
	e := newR21(t)
	e.gitDir("ws/g1")
	e.gitDir("ws/g2")
	e.write("ws/sub/.git", "gitdir: ../g1\n")
	e.write("ws/sub/x.txt", "x")
	aged(t)
	in := e.input(0)
	c := NewCache()
	e.check(c, in, "first", -1, e.abs("ws/g1/hooks"), e.abs("ws/g1/config"))
	e.check(c, in, "second", -1)
	e.check(c, in, "third", 1)
	e.rewrite("ws/sub/.git", "gitdir: ../g2\n")
	e.check(c, in, "rewritten to g2", 0, e.abs("ws/g2/hooks"), e.abs("ws/g2/config"))
	e.settled(c, in, "rewritten to g2, again")
	// past what is read (4096 bytes): the same first page, another tail. git strips only the
	// line end, so the padded line names "../g1" and 4083 spaces (no folder): the policy must
	// still be a compilation's (e.check), kept or not.
	pad := "gitdir: ../g1" + strings.Repeat(" ", 4096-len("gitdir: ../g1"))
	e.rewrite("ws/sub/.git", pad+"\n")
	e.check(c, in, "padded", 0)
	e.settled(c, in, "padded again")
	e.rewrite("ws/sub/.git", pad+"/../../g2\n")
	e.check(c, in, "tail past 4096 changed", -1)
}

// TestR21GitdirMadeLater: a .git file naming a git directory that does not exist yet (in the
// workspace, behind a link that does not exist yet, behind a link to a folder made later), which is
// then made, renamed into place, or reached by a link made later.
func TestR21GitdirMadeLater(t *testing.T) {
	e := newR21(t)
	e.write("ws/a/.git", "gitdir: ../later\n")
	e.write("ws/b/.git", "gitdir: "+e.abs("ws/lnk/g")+"\n")
	e.write("ws/c/.git", "gitdir: ../via/g\n")
	aged(t)
	in := e.input(0)
	c := NewCache()
	e.check(c, in, "first", -1)
	e.check(c, in, "second", 1)
	e.gitDir("stage/later")
	e.rename("stage/later", "ws/later")
	e.check(c, in, "later renamed in", 0, e.abs("ws/later/hooks"), e.abs("ws/later/config"))
	e.settled(c, in, "later renamed in, again")
	e.gitDir("ws/real/g")
	e.link("real", "ws/lnk")
	e.check(c, in, "ws/lnk made a link to ws/real", 0, e.abs("ws/real/g/hooks"))
	e.settled(c, in, "again")
	e.gitDir("ws/real2/g")
	e.link("real2", "ws/lnk2")
	e.rename("ws/lnk2", "ws/lnk")
	e.check(c, in, "ws/lnk renamed over to ws/real2", 0, e.abs("ws/real2/g/hooks"))
	e.settled(c, in, "again")
	// the link's target made later, by rename, two levels down
	e.link("deep/er", "ws/via")
	e.mkdir("ws/deep")
	cacheCheck(t, c, in, "ws/via a dangling link (the compilation fails)", false)
	e.gitDir("stage/er/g")
	e.rename("stage/er", "ws/deep/er")
	e.check(c, in, "ws/deep/er renamed in", -1, e.abs("ws/deep/er/g/hooks"))
	e.check(c, in, "again", -1)
	e.check(c, in, "again"+" (third)", 1)
}

// TestR21ModulesAndWorktreesAsLinks: modules/ and worktrees/ as links (relative, absolute, chains,
// to outside the writable folder), repointed by rename-over (their folder's entries unchanged), and
// links and odd shapes below them.
func TestR21ModulesAndWorktreesAsLinks(t *testing.T) {
	e := newR21(t)
	e.gitDir("ws/.git")
	e.gitDir("ws/mods/a")
	e.gitDir("ws/mods2/a")
	e.gitDir("home/wts/w")
	e.gitDir("home/wts2/w")
	e.link("../mods", "ws/.git/modules")
	e.link("l1", "ws/.git/worktrees")
	e.link(e.abs("ws/l2"), "ws/.git/l1")
	e.link("../home/wts", "ws/l2")
	aged(t)
	in := e.input(0)
	c := NewCache()
	e.check(c, in, "first", -1, e.abs("ws/mods/a/hooks"), e.abs("home/wts/w/hooks"))
	e.check(c, in, "second", -1)
	e.check(c, in, "third", 1)
	e.link("../mods2", "ws/.git/next")
	e.rename("ws/.git/next", "ws/.git/modules")
	e.check(c, in, "modules renamed over to mods2", 0, e.abs("ws/mods2/a/hooks"))
	e.settled(c, in, "again")
	e.link("../home/wts2", "ws/l2next")
	e.rename("ws/l2next", "ws/l2")
	e.check(c, in, "the chain's last link repointed", 0, e.abs("home/wts2/w/hooks"))
	e.settled(c, in, "again")
	// the target folder renamed over by another with the same entries
	e.gitDir("home/stage/w")
	e.write("home/stage/w/config.worktree", "")
	e.rename("home/wts2", "home/trash")
	e.rename("home/stage", "home/wts2")
	e.check(c, in, "wts2 renamed over", 0, e.abs("home/wts2/w/config.worktree"))
	e.settled(c, in, "again")
	// below modules: a link is not followed (by the walk or the glob it replaced)
	e.gitDir("ws/elsewhere/b")
	e.link("../elsewhere/b", "ws/mods2/b")
	e.check(c, in, "a link below modules", 0)
	e.settled(c, in, "again")
	// modules made a link to a file, then to itself
	e.write("ws/file", "x")
	e.link("../file", "ws/.git/modules")
	e.check(c, in, "modules to a file", 0)
	e.link("modules", "ws/.git/modules")
	c.Compile(in)
	Compile(in)
	e.link("../mods", "ws/.git/modules")
	e.check(c, in, "modules back", -1, e.abs("ws/mods/a/hooks"))
}

// TestR21HeadShapes: HEAD as a file, a folder, a link, a dangling link, removed, at every depth.
func TestR21HeadShapes(t *testing.T) {
	e := newR21(t)
	e.gitDir("ws/.git")
	e.gitDir("ws/.git/modules/a")
	e.write("ws/.git/modules/a/config.worktree", "")
	aged(t)
	in := e.input(0)
	c := NewCache()
	e.check(c, in, "first", -1, e.abs("ws/.git/modules/a/hooks"))
	e.check(c, in, "second", -1)
	steps := []struct {
		name string
		do   func()
	}{
		{"HEAD a folder", func() { e.remove("ws/.git/modules/a/HEAD"); e.mkdir("ws/.git/modules/a/HEAD/x") }},
		{"HEAD a link", func() { e.link("../../HEAD", "ws/.git/modules/a/HEAD") }},
		{"HEAD a dangling link", func() { e.link("nowhere", "ws/.git/modules/a/HEAD") }},
		{"HEAD removed", func() { e.remove("ws/.git/modules/a/HEAD") }},
		{"HEAD deeper", func() { e.gitDir("ws/.git/modules/a/x/y/z") }},
		{"HEAD back", func() { e.write("ws/.git/modules/a/HEAD", "0") }},
		{"hooks a link out", func() { e.mkdir("home/h"); e.link(e.abs("home/h"), "ws/.git/modules/a/hooks") }},
		{"config a link", func() { e.link("../../../home/cfg", "ws/.git/modules/a/config") }},
		{"config.worktree a folder", func() { e.remove("ws/.git/modules/a/config.worktree"); e.mkdir("ws/.git/modules/a/config.worktree") }},
		{"a folder renamed over a", func() {
			e.gitDir("ws/stage")
			e.mkdir("ws/stage/x/y/z")
			e.rename("ws/.git/modules/a", "ws/trash")
			e.rename("ws/stage", "ws/.git/modules/a")
		}},
	}
	for _, s := range steps {
		s.do()
		e.check(c, in, s.name, -1)
		e.check(c, in, s.name+", again", -1)
	}
}

// TestR21BudgetEdge: DenyBudget 1 (walks stop at 100 entries): a .git just inside and just past
// the bound, entries added and removed around it, in folders whose listings are kept (leaves
// counted, not read), and a git directory whose modules hold about the bound.
func TestR21BudgetEdge(t *testing.T) {
	e := newR21(t)
	e.gitDir("ws/g")
	for i := range 45 {
		e.write("ws/leaf1/f"+itoa(i), "")
		e.write("ws/leaf2/f"+itoa(i), "")
	}
	e.write("ws/z/.git", "gitdir: ../g\n")
	e.gitDir("ws/.git")
	for i := range 30 {
		e.write("ws/.git/modules/m"+itoa(i)+"/HEAD", "")
	}
	aged(t)
	in := e.input(1)
	c := NewCache()
	e.check(c, in, "first", -1)
	e.check(c, in, "second", -1)
	for i := range 12 {
		switch i % 4 {
		case 0:
			e.write("ws/leaf1/n"+itoa(i), "")
		case 1:
			e.remove("ws/leaf1/f" + itoa(i))
		case 2:
			e.write("ws/leaf2/n"+itoa(i), "")
			aged(t)
		case 3:
			e.remove("ws/leaf2/f" + itoa(i))
			e.remove("ws/leaf1/f" + itoa(i+20))
		}
		e.check(c, in, "step "+itoa(i), -1)
		e.check(c, in, "step "+itoa(i)+", again", -1)
	}
}

// TestR21HardLinkedGitfile: the .git file is a hard link of a file elsewhere in the workspace,
// rewritten in place through that other name.
func TestR21HardLinkedGitfile(t *testing.T) {
	e := newR21(t)
	e.gitDir("ws/g1")
	e.gitDir("ws/g2")
	e.write("ws/notes.txt", "gitdir: ../g1\n")
	e.mkdir("ws/sub")
	must(t, e.root.Link("ws/notes.txt", "ws/sub/.git"))
	aged(t)
	in := e.input(0)
	c := NewCache()
	e.check(c, in, "first", -1, e.abs("ws/g1/hooks"))
	e.check(c, in, "second", -1)
	e.check(c, in, "third", 1)
	e.rewrite("ws/notes.txt", "gitdir: ../g2\n")
	e.check(c, in, "rewritten through its other name", 0, e.abs("ws/g2/hooks"))
}

// TestR21BindMounts: a git directory mounted over the one a .git file names, a .git file mounted
// over another, a folder mounted over modules/; then each unmounted. Mounts do not change the
// ctime of the folder they cover or of its parent.
func TestR21BindMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	e := newR21(t)
	e.gitDir("ws/g1")
	e.gitDir("ws/g2")
	e.write("ws/g2/config.worktree", "")
	e.mkdir("ws/g2/hooks/x")
	e.gitDir("ws/.git")
	e.gitDir("ws/.git/modules/a")
	e.gitDir("home/mods/b")
	e.write("ws/sub/.git", "gitdir: ../g1\n")
	e.write("home/gf", "gitdir: "+e.abs("ws/g2")+"\n")
	aged(t)
	in := e.input(0)
	c := NewCache()
	e.check(c, in, "first", -1)
	e.check(c, in, "second", -1)
	safeMount := func(src, dst string) func() {
		t.Helper()
		for _, p := range []string{src, dst} {
			var st unix.Stat_t
			if !strings.HasPrefix(p, e.base+"/") || unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
				t.Fatalf("refusing to mount %s on %s", src, dst)
			}
		}
		return bindMount(t, src, dst)
	}
	u1 := safeMount(e.abs("ws/g2"), e.abs("ws/g1"))
	e.check(c, in, "g2 mounted over g1", 0, e.abs("ws/g1/hooks"))
	e.settled(c, in, "again")
	u2 := safeMount(e.abs("home/gf"), e.abs("ws/sub/.git"))
	e.check(c, in, "a gitfile mounted over sub/.git", -1, e.abs("ws/g2/hooks"))
	e.settled(c, in, "again")
	u3 := safeMount(e.abs("home/mods"), e.abs("ws/.git/modules"))
	e.check(c, in, "home/mods mounted over modules", 0, e.abs("ws/.git/modules/b/hooks"))
	e.settled(c, in, "again")
	u3()
	e.check(c, in, "modules unmounted", 0, e.abs("ws/.git/modules/a/hooks"))
	u2()
	e.check(c, in, "sub/.git unmounted", 0)
	u1()
	e.check(c, in, "g1 unmounted", 0, e.abs("ws/g1/hooks"))
	e.settled(c, in, "again")
}

// TestR21Chmod: folders of the walks made 000 and back (root reads them anyway; compared).
func TestR21Chmod(t *testing.T) {
	e := newR21(t)
	e.gitDir("ws/.git")
	e.gitDir("ws/.git/modules/a")
	e.gitDir("ws/g")
	e.write("ws/s/.git", "gitdir: ../g\n")
	aged(t)
	in := e.input(0)
	c := NewCache()
	e.check(c, in, "first", -1)
	for _, p := range []string{"ws/.git/modules", "ws/.git/modules/a", "ws/s", "ws/s/.git", "ws/g"} {
		must(t, e.root.Chmod(p, 0))
		e.check(c, in, "chmod 0 "+p, -1)
		e.check(c, in, "chmod 0 "+p+", again", -1)
		must(t, e.root.Chmod(p, 0o755))
		e.check(c, in, "chmod back "+p, -1)
	}
}

// ---- Gaps of the compilation itself, fixed (a fresh Compile agreed with the cache) ----
//
// The git directory git used for a work tree, and whose hooks and config it read, was not masked:
// a .git link to a gitfile, a worktree's commondir, a gitdir line's trailing space, a ".." after a
// link in a gitdir. Each test asks git itself which directories it uses.

// gitUses returns the git directory and common directory git uses in dir (git rev-parse), or
// skips the test without git.
func gitUses(t *testing.T, dir string) (gitDir, common string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	cmd := exec.Command("git", "rev-parse", "--absolute-git-dir", "--git-common-dir")
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "PATH=/usr/bin:/bin", "GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir)}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git rev-parse in %s: %v: %s", dir, err, out)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	common = lines[1]
	if !filepath.IsAbs(common) {
		common = filepath.Join(dir, common)
	}
	return lines[0], filepath.Clean(common)
}

// r21WantGitMasked fails when the hooks and config of the git (common) directory git uses in dir
// are not masked by the policy of in (compiled afresh; the cache is checked against it too).
func r21WantGitMasked(t *testing.T, e *r21Env, in Input, dir string) {
	t.Helper()
	gd, common := gitUses(t, dir)
	t.Logf("git in %s uses git dir %q, common dir %q", dir, gd, common)
	c := NewCache()
	p := e.check(c, in, "first", -1)
	e.check(c, in, "second", -1)
	for _, m := range []string{filepath.Join(common, "hooks"), filepath.Join(common, "config")} {
		if !deniedIn(p, m) {
			t.Errorf("git in %s reads %s, which the policy does not mask (the tool may write it)", dir, m)
		}
	}
}

// TestR21GapGitLinkToGitfile: .git a symbolic link to a gitfile. found() follows the link with
// stat, sees a regular file, and masks nothing; git stat()s .git, reads the gitfile and uses the
// git directory it names.
func TestR21GapGitLinkToGitfile(t *testing.T) {
	e := newR21(t)
	e.gitDir("ws/proj.git")
	e.write("ws/gitfiles/proj", "gitdir: "+e.abs("ws/proj.git")+"\n")
	e.mkdir("ws/proj")
	e.link("../gitfiles/proj", "ws/proj/.git")
	r21WantGitMasked(t, e, e.input(0), e.abs("ws/proj"))
}

// TestR21GapWorktreeCommondir: a worktree of a bare repository kept in the workspace (a common
// layout: proj.git plus `git worktree add`). gitfileMasks masks the worktree's own git directory
// (.../worktrees/wt), but git reads hooks and config from the common directory its commondir
// file names, which is not masked (the bare repository is not named .git).
func TestR21GapWorktreeCommondir(t *testing.T) {
	e := newR21(t)
	e.gitDir("ws/proj.git")
	e.write("ws/proj.git/worktrees/wt/HEAD", "ref: refs/heads/main\n")
	e.write("ws/proj.git/worktrees/wt/commondir", "../..\n")
	e.write("ws/proj.git/worktrees/wt/gitdir", e.abs("ws/wt/.git")+"\n")
	e.write("ws/wt/.git", "gitdir: "+e.abs("ws/proj.git/worktrees/wt")+"\n")
	r21WantGitMasked(t, e, e.input(0), e.abs("ws/wt"))
}

// TestR21GapGitdirTrailingSpace: git strips only the line end of "gitdir: PATH"; gitfileMasks
// trims spaces, so "gitdir: x.git " names x.git to it and "x.git " to git.
func TestR21GapGitdirTrailingSpace(t *testing.T) {
	e := newR21(t)
	e.gitDir("ws/x.git ")
	e.gitDir("ws/x.git")
	e.write("ws/sub/.git", "gitdir: ../x.git \n")
	r21WantGitMasked(t, e, e.input(0), e.abs("ws/sub"))
}

// TestR21GapGitdirDotDotThroughLink: gitfileMasks joins and cleans the gitdir lexically, so
// "gitdir: sym/../g" is ws/sub/g to it, while git (and the kernel) resolve sym first and then
// "..": the git directory used is the one beside sym's target.
func TestR21GapGitdirDotDotThroughLink(t *testing.T) {
	e := newR21(t)
	e.gitDir("ws/tgt/g")
	e.mkdir("ws/tgt/inner")
	e.link("../tgt/inner", "ws/sub/sym")
	e.write("ws/sub/.git", "gitdir: sym/../g\n")
	r21WantGitMasked(t, e, e.input(0), e.abs("ws/sub"))
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
