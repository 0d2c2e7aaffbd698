package sandbox

import (
	"errors"
	"os"
	"slices"
	"testing"
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
	aged(t)
	g.snap()
	g.snap() // the second walk uses the kept listings

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
