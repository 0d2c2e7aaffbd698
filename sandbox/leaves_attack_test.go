package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	fx "github.com/clihost/clihost/internal/fixture"
)

// rewriteInPlace replaces the content of the file at p without a new name (O_TRUNC): no folder's
// ctime moves, so every kept listing stays good.
func rewriteInPlace(t *testing.T, p, content string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	must(t, err)
	_, err = f.WriteString(content)
	must(t, errors.Join(err, f.Close()))
}

// TestGitGuardGlobalConfigOfAnyName attacks the walks' judgement of the per-user git files: git
// reads ~/.gitconfig through a symbolic link (a dotfiles repository's gitconfig, a common set-up),
// so the file it reads may have any name, and a writable root holding it (the dotfiles repository
// as the workspace) must not let a call change it unjudged, in place or by pointing the link
// elsewhere. Before the fix the walk (and the unchanged-leaf shortcut, which copied its test)
// recognised a per-user file only under the names .gitconfig, config and attributes.
func TestGitGuardGlobalConfigOfAnyName(t *testing.T) {
	g := newGuard(t)
	g.write("dots/gitconfig", "[user]\n\tname = me\n", 0o644)
	g.write("dots/gitattributes", "*.txt text\n", 0o644)
	g.write("dots/other", "[core]\n\tfsmonitor = evil\n", 0o644)
	g.write("home/.config/git/keep", "", 0o644)
	must(t, os.Symlink("../dots/gitconfig", g.path("home/.gitconfig")))
	must(t, os.Symlink("../../../dots/gitattributes", g.path("home/.config/git/attributes")))
	g.p = GitPolicy([]string{g.ws}, g.path("home"))
	g.snapKept()

	rewriteInPlace(t, g.path("dots/gitconfig"), "[user]\n\tname = me\n[core]\n\tfsmonitor = evil\n")
	rewriteInPlace(t, g.path("dots/gitattributes"), "* filter=evil\n")
	must(t, os.Remove(g.path("home/.gitconfig")))
	must(t, os.Symlink("../dots/other", g.path("home/.gitconfig")))
	found := g.check()
	want := []string{"dots/gitattributes", "dots/gitconfig", "home/.gitconfig"}
	if got := keys(found); !slices.Equal(got, want) {
		t.Errorf("neutralised %q, want %q", got, want)
	}
	if target, err := os.Readlink(g.path("home/.gitconfig")); err != nil || target != "../dots/gitconfig" {
		t.Errorf("~/.gitconfig links to %q (%v), want the owner's ../dots/gitconfig back", target, err)
	}
}

// TestGitGuardUnchangedLeavesByParentAndGitFiles attacks the shortcut with the files judged by the
// name of the folder that holds them (a runConfig of .cargo, .hg, .config), with a worktree's git
// directory (HEAD, commondir, config.worktree: no folder), and with the files the git rule finds
// through a git directory or a config rather than by the walk (hooks, info/attributes,
// a todo list, a core.hooksPath directory, an included file), every one a leaf the shortcut skips
// or may skip, changed in place; and a leaf renamed to a name that makes its file a runConfig. The
// check must judge each. It fails unless the shortcut was taken.
func TestGitGuardUnchangedLeavesByParentAndGitFiles(t *testing.T) {
	g := newGuard(t)
	g.repo("r/.git", initConfig+"[core]\n\thooksPath = githooks\n[include]\n\tpath = ../inc/shared\n")
	g.repo("s/.git", initConfig)
	g.write("s/.git/hooks/pre-commit", "#!/bin/sh\nmine\n", 0o755)
	g.write("s/.git/info/attributes", "*.txt text\n", 0o644)
	g.write("s/.git/rebase-merge/git-rebase-todo", "pick 1 x\n", 0o644)
	g.write("r/githooks/pre-push", "#!/bin/sh\nmine\n", 0o755)
	g.write("r/inc/shared", "[user]\n\tname = me\n", 0o644)
	g.write("p/.cargo/config.toml", "[build]\njobs = 2\n", 0o644)
	g.write("p/.hg/hgrc", "", 0o644)
	g.write("p/.config/mise.toml", "", 0o644)
	g.write("wt/HEAD", "ref: refs/heads/main\n", 0o644) // a worktree's git directory: no folder in it
	g.write("wt/commondir", "../s/.git\n", 0o644)
	g.write("wt/config.worktree", "[user]\n\tname = me\n", 0o644)
	g.write("q/keep", "", 0o644)
	g.write("p/cargo/config.toml", "[build]\nrustc-wrapper = \"/evil\"\n", 0o644)
	g.snapKept()

	for rel, content := range map[string]string{
		"s/.git/hooks/pre-commit":             "#!/bin/sh\nevil\n",
		"s/.git/info/attributes":              "* filter=evil\n",
		"s/.git/rebase-merge/git-rebase-todo": "exec evil\n",
		"r/githooks/pre-push":                 "#!/bin/sh\nevil\n",
		"r/inc/shared":                        "[core]\n\tfsmonitor = evil\n",
		"p/.cargo/config.toml":                "[build]\nrustc-wrapper = \"/evil\"\n",
		"p/.hg/hgrc":                          "[hooks]\nupdate = evil\n",
		"p/.config/mise.toml":                 "[hooks]\nenter = \"evil\"\n",
		"wt/commondir":                        "/nowhere\n",
		"wt/config.worktree":                  "[core]\n\tfsmonitor = evil\n",
	} {
		rewriteInPlace(t, g.path(rel), content)
	}
	must(t, os.Rename(g.path("p/cargo"), g.path("q/.cargo")))
	kept := keptSince()
	found := g.check()
	want := []string{"p/.cargo/config.toml", "p/.config/mise.toml", "p/.hg/hgrc", "q/.cargo/config.toml", "r/githooks/pre-push",
		"r/inc/shared", "s/.git/hooks/pre-commit", "s/.git/info/attributes", "s/.git/rebase-merge/git-rebase-todo",
		"wt/commondir", "wt/config.worktree"}
	if got := keys(found); !slices.Equal(got, want) {
		t.Errorf("neutralised %q, want %q", got, want)
	}
	if kept() < 3 {
		t.Fatalf("the check used %d kept listings: the unchanged leaves were read again, so this tested nothing", kept())
	}
}

// TestGitGuardGlobalConfigLinksOnTheWay: every symbolic link git follows to reach a per-user file
// — a linked ~/.config/git, a link inside the target of ~/.gitconfig's — decides what git reads,
// so a call that points one elsewhere (at a config of its own) is undone like a changed config.
func TestGitGuardGlobalConfigLinksOnTheWay(t *testing.T) {
	g := newGuard(t)
	g.write("real/dots/gitconfig", "[user]\n\tname = me\n", 0o644)
	g.write("real/git/config", "[user]\n\tname = me\n", 0o644)
	g.write("evil/gitconfig", "[core]\n\tfsmonitor = evil\n", 0o644)
	g.write("evil/config", "[core]\n\tfsmonitor = evil\n", 0o644)
	g.write("home/.config/keep", "", 0o644)
	must(t, os.Symlink("../real/dots", g.path("home/dots")))
	must(t, os.Symlink("dots/gitconfig", g.path("home/.gitconfig")))
	must(t, os.Symlink("../../real/git", g.path("home/.config/git")))
	g.p = GitPolicy([]string{g.ws}, g.path("home"))
	g.snap()

	for rel, target := range map[string]string{"home/dots": "../evil", "home/.config/git": "../../evil"} {
		must(t, os.Remove(g.path(rel)))
		must(t, os.Symlink(target, g.path(rel)))
	}
	found := g.check()
	if got, want := keys(found), []string{"home/.config/git", "home/dots"}; !slices.Equal(got, want) {
		t.Errorf("neutralised %q, want %q", got, want)
	}
	for rel, want := range map[string]string{"home/dots": "../real/dots", "home/.config/git": "../../real/git"} {
		if target, err := os.Readlink(g.path(rel)); err != nil || target != want {
			t.Errorf("%s links to %q (%v), want the owner's %q back", rel, target, err, want)
		}
	}
}

// TestGitGuardUnchangedLeavesCountAgainstTheBudget: a snapshot whose walk skips unchanged leaves
// still counts their entries, so a root over the budget is refused whether or not its listings
// were kept.
func TestGitGuardUnchangedLeavesCountAgainstTheBudget(t *testing.T) {
	g := newGuard(t)
	for i := range 20 {
		for j := range 10 {
			g.write(fmt.Sprintf("l%02d/f%d", i, j), "", 0o644)
		}
	}
	aged(t)
	g.snap() // keeps the listings
	kept := keptSince()
	if err := g.p.SnapshotGit(20 + 20*10 - 1); !errors.Is(err, ErrGitGuardBudget) {
		t.Errorf("a snapshot over the budget through kept listings: %v, want ErrGitGuardBudget", err)
	}
	if kept() < 10 {
		t.Fatalf("the snapshot used %d kept listings, so this tested nothing", kept())
	}
	if err := g.p.SnapshotGit(20 + 20*10); err != nil {
		t.Errorf("a snapshot within the budget: %v", err)
	}
}

// TestCompileFollowsGitfilesChangedInKeptLeaves: the compile's search does not open an unchanged
// folder without a .git, but one holding a .git gitfile is read, so a gitfile pointed, in place,
// at another git directory of the writable root gets that directory masked.
func TestCompileFollowsGitfilesChangedInKeptLeaves(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "a/.git/HEAD"), "ref: refs/heads/main\n", 0o644)
	write(t, filepath.Join(f.ws, "store/b/HEAD"), "ref: refs/heads/main\n", 0o644)
	write(t, filepath.Join(f.ws, "sub/.git"), "gitdir: ../a/.git\n", 0o644)
	for i := range 10 {
		write(t, filepath.Join(f.ws, fmt.Sprintf("src/p%d/f.go", i)), "package p\n", 0o644)
	}
	in := f.input(fsSandbox(nil, []string{"./**"}, nil))
	aged(t)
	f.compile(in)
	rewriteInPlace(t, filepath.Join(f.ws, "sub/.git"), "gitdir: ../store/b\n")
	kept := keptSince()
	wantIn(t, "Deny", f.compile(in).Deny, filepath.Join(f.ws, "store/b/hooks"), filepath.Join(f.ws, "store/b/config"))
	if kept() < 10 {
		t.Fatalf("the second compile used %d kept listings, so this tested nothing", kept())
	}
}

// leavesChild names the environment variable that makes TestGitGuardUnreadableLeavesChild the child
// of TestGitGuardUnreadableLeaves: the workspace it checks.
const leavesChild = "CLIHOST_LEAVES_CHILD_WS"

// TestGitGuardUnreadableLeaves attacks the unchanged-leaf shortcut of an unprivileged clihost: a
// leaf whose listing was kept while it was readable is made unreadable by the call (its own, 0311)
// or by its owner, root (0711: clihost can enter it but neither list it nor make it listable). The
// check must make the first readable and move the second aside, as without kept listings. The
// guard runs as AgentUID in a copy of this test binary (TestGitGuardUnreadableLeavesChild).
func TestGitGuardUnreadableLeaves(t *testing.T) {
	fx.NeedRoot(t) // to run the guard as another, unprivileged uid
	base := agentDir(t)
	ws := filepath.Join(base, "ws")
	g := &guardFixture{t: t, ws: ws}
	for _, d := range []string{"own", "root-owned", "other"} {
		g.write(d+"/f", "", 0o644)
	}
	giveTree(t, ws, "root-owned")
	child := startAgentChild(t, base, "TestGitGuardUnreadableLeavesChild", leavesChild+"="+ws)
	child.await("KEPT", func() { must(t, os.Chmod(g.path("root-owned"), 0o711)) }) // what the owner, root, does meanwhile
	child.wait()
}

// TestGitGuardUnreadableLeavesChild is the unprivileged half of TestGitGuardUnreadableLeaves.
func TestGitGuardUnreadableLeavesChild(t *testing.T) {
	ws := os.Getenv(leavesChild)
	if ws == "" {
		t.Skip("run by TestGitGuardUnreadableLeaves")
	}
	g := &guardFixture{t: t, ws: ws, p: GitPolicy([]string{ws}, "/nonexistent")}
	aged(t)
	g.snap()
	kept := keptSince()
	g.snap()
	if kept() < 3 {
		t.Fatalf("the snapshot used %d kept listings, so this tests nothing", kept())
	}
	must(t, os.Chmod(g.path("own"), 0o311)) // the call
	fmt.Println("KEPT")
	if !bufio.NewScanner(os.Stdin).Scan() {
		t.Fatal("no go-ahead")
	}
	found := g.check()
	if f := found["own"]; f.Action != "made readable" {
		t.Errorf("own, made unreadable by the call: %+v", f)
	}
	if f := found["root-owned"]; f.Action != "quarantined" {
		t.Errorf("root-owned, made unlistable by its owner: %+v", f)
	}
	if _, ok := found["other"]; ok || len(found) != 2 {
		t.Errorf("found %q, want own and root-owned alone", keys(found))
	}
}
