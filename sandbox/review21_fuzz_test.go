package sandbox

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestR21GitDifferential: a randomized differential centred on what the git search follows: .git
// folders, .git files (relative, absolute, through links, to folders made later, rewritten in place
// with the same size), modules/ and worktrees/ as links or folders, HEAD as a file, folder or link,
// hard links, renames over, chmod, many entries against DenyBudget 1, pauses that let listings be
// kept. After every change three calls compare Cache.Compile with a fresh Compile and one reading
// every folder (compareThree). R21_SEEDS seeds (default 4) of 150 steps each.
//
// Every change is made through an os.Root on the test's temp folder: the links it plants (to /etc,
// /usr/bin, outside) are never followed out of it.
func TestR21GitDifferential(t *testing.T) {
	aged(t)
	fuzzSeeds(t, "R21_SEEDS", 4, func(t *testing.T, seed uint64) int { return r21Fuzz(t, seed, 150) })
}

func r21Fuzz(t *testing.T, seed uint64, steps int) int {
	rng := rand.New(rand.NewPCG(seed, 21))
	e := newR21(t)
	root := e.root
	e.gitDir("ws/.git")
	e.gitDir("ws/.git/modules/a")
	e.gitDir("ws/g1")
	e.gitDir("ws/g2")
	e.gitDir("home/g3")
	e.write("ws/sub/.git", "gitdir: ../g1\n")
	in := e.input([]int{0, 1}[seed%2])
	rels := []string{
		"ws/.git", "ws/.git/HEAD", "ws/.git/modules", "ws/.git/modules/a", "ws/.git/modules/a/HEAD",
		"ws/.git/modules/a/hooks", "ws/.git/modules/a/config", "ws/.git/modules/a/config.worktree",
		"ws/.git/modules/a/modules/b", "ws/.git/modules/a/modules/b/HEAD", "ws/.git/worktrees",
		"ws/.git/worktrees/w", "ws/.git/worktrees/w/HEAD", "ws/.git/worktrees/w/config.worktree",
		"ws/g1", "ws/g1/HEAD", "ws/g1/hooks", "ws/g1/modules", "ws/g1/modules/x/HEAD", "ws/g2", "ws/g2/worktrees/y/HEAD",
		"ws/sub", "ws/sub/.git", "ws/sub/deep", "ws/sub/deep/.git", "ws/sub/deep/f", "ws/lnk", "ws/mods",
		"ws/mods/m", "ws/mods/m/HEAD", "ws/mods/m/hooks", "ws/stage", "ws/stage/s", "ws/stage/s/HEAD",
		"ws/big", "ws/leaf", "ws/leaf/f", "home/g3", "home/g3/hooks", "home/mods", "home/mods/q/HEAD", "home/gf",
	}
	var targets []string
	for _, r := range rels {
		targets = append(targets, e.abs(r))
	}
	targets = append(targets, "/etc", "/usr/bin", e.abs("ws/later"), e.abs("ws/lnk/g"), e.abs("ws/sub/deep/../../g2"))
	pick := func(l []string) string { return l[rng.IntN(len(l))] }
	relTo := func(from, tgt string) string {
		if rng.IntN(2) == 0 {
			if r, err := filepath.Rel(filepath.Dir(e.abs(from)), tgt); err == nil {
				return r
			}
		}
		return tgt
	}
	c := NewCache()
	reusedAfter := 0
	for step := range steps {
		p := pick(rels)
		var what string
		switch op := rng.IntN(16); op {
		case 0:
			root.RemoveAll(p)
			what = "remove " + p
		case 1:
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.RemoveAll(p)
			root.WriteFile(p, []byte(pick([]string{"x", "ref: refs/heads/main\n", ""})), 0o644)
			what = "file " + p
		case 2:
			root.MkdirAll(p, 0o755)
			what = "mkdir " + p
		case 3:
			tgt := relTo(p, pick(targets))
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.RemoveAll(p)
			root.Symlink(tgt, p)
			what = "link " + p + " -> " + tgt
		case 4:
			src := pick(rels)
			root.MkdirAll(filepath.Dir(p), 0o755)
			if rng.IntN(2) == 0 {
				root.RemoveAll(p) // a folder is renamed over only when empty
			}
			root.Rename(src, p)
			what = "rename " + src + " onto " + p
		case 5, 6:
			dir := pick([]string{"ws/sub", "ws/sub/deep", "ws/lnk", "ws/mods/m", "ws/leaf", "ws"})
			if dir == "ws" {
				dir = "ws/wt"
			}
			root.MkdirAll(dir, 0o755)
			g := filepath.Join(dir, ".git")
			tgt := relTo(g, pick(targets))
			if rng.IntN(4) == 0 {
				// through the link ws/lnk and back up (resolved lexically by the compilation)
				tgt = "../lnk/../" + filepath.Base(tgt)
			}
			if rng.IntN(3) == 0 {
				// a .git link to a gitfile
				root.WriteFile("home/gf", []byte("gitdir: "+pick(targets)+"\n"), 0o644)
				root.RemoveAll(g)
				root.Symlink(e.abs("home/gf"), g)
				what = "gitlink " + g
				break
			}
			root.RemoveAll(g)
			root.WriteFile(g, []byte("gitdir: "+tgt+"\n"), 0o644)
			what = "gitfile " + g + " -> " + tgt
		case 7:
			// rewrite a .git file in place to another target of the same length, times put back
			g := pick([]string{"ws/sub/.git", "ws/sub/deep/.git", "ws/wt/.git", "ws/mods/m/.git"})
			old, err := root.ReadFile(g)
			fi, serr := root.Lstat(g)
			if err != nil || serr != nil || !fi.Mode().IsRegular() {
				what = "nothing (no gitfile " + g + ")"
				break
			}
			tgt := "gitdir: " + pick([]string{"../g1", "../g2", "../../g1", "../../g2", "../mods", "../../home/g3"})
			if len(tgt)+1 > len(old) {
				what = "nothing (too long)"
				break
			}
			nb := []byte(tgt + strings.Repeat("/", len(old)-len(tgt)-1) + "\n")
			if f, err := root.OpenFile(g, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
				f.Write(nb)
				f.Close()
				root.Chtimes(g, fi.ModTime(), fi.ModTime())
			}
			what = "rewrite " + g + " as " + string(nb[:len(nb)-1])
		case 8:
			src := pick(rels)
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.RemoveAll(p)
			root.Link(src, p)
			what = "hard link " + src + " at " + p
		case 9:
			root.MkdirAll(p, 0o755)
			for _, n := range []string{"HEAD", "config", "hooks/x", "objects/y"} {
				root.MkdirAll(filepath.Dir(filepath.Join(p, n)), 0o755)
				root.WriteFile(filepath.Join(p, n), []byte("0"), 0o644)
			}
			what = "git dir " + p
		case 10:
			dir := pick([]string{"ws/big", "ws/leaf", "ws/.git/modules/a", "ws/mods"})
			root.MkdirAll(dir, 0o755)
			for i := range 30 + rng.IntN(60) {
				root.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), nil, 0o644)
			}
			what = "many files in " + dir
		case 11:
			time.Sleep(2 * listingMargin)
			what = "nothing (aged)"
		case 12:
			mode := []os.FileMode{0, 0o755, 0o311}[rng.IntN(3)]
			root.Chmod(p, mode)
			what = fmt.Sprintf("chmod %v %s", mode, p)
		case 13:
			h := filepath.Join(p, "HEAD")
			root.MkdirAll(p, 0o755)
			root.RemoveAll(h)
			switch rng.IntN(3) {
			case 0:
				root.WriteFile(h, []byte("0"), 0o644)
			case 1:
				root.Mkdir(h, 0o755)
			default:
				root.Symlink(pick([]string{"nowhere", "../HEAD", "/etc/hostname"}), h)
			}
			what = "HEAD shape at " + p
		default:
			what = "nothing"
		}
		for i := range 3 {
			_, _, reused := compareThree(t, c, in, fmt.Sprintf("seed %d step %d (%s), call %d", seed, step, what, i))
			if i == 0 && reused && !strings.HasPrefix(what, "nothing") {
				reusedAfter++
			}
		}
		if os.Getenv("R21_DEBUG") != "" {
			j := &journal{}
			_, err := compileAsking(in, j)
			t.Logf("step %d (%s): err %v, opaque %q, %d questions", step, what, err, j.opaque, len(j.questions))
		}
	}
	for _, r := range rels {
		root.Chmod(r, 0o755)
	}
	return reusedAfter
}
