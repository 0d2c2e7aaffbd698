package sandbox

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// freshListings runs fn with an empty process-wide listings cache and puts the kept one back: the
// oracle of a compilation that reads every folder now, so that a stale kept listing (which a plain
// Compile shares with Cache.Compile) cannot make both agree on a wrong policy.
func freshListings(fn func()) {
	saved := listings
	listings = &listingCache{byDir: map[listingKey]listing{}}
	defer func() { listings = saved }()
	fn()
}

// TestR20WritableDifferential extends TestR18RandomDifferential to writable folders: a workspace
// and two ~ folders a tool may write (searched for git directories at each compilation), changed
// at random (files, nested folders, links to folders inside and outside, .git folders, gitfiles
// and links created at depth, renames, a folder replaced by a file or a link, chmod 0 and back,
// many files at once against a small DenyBudget, utimes, pauses that let listings be kept). After
// every change two calls compare Cache.Compile with a fresh Compile, and with a Compile that
// reads every folder (no kept listing).
//
// Every change is made through an os.Root on the folder holding the trees: the links the test
// plants (to /etc, /usr/bin) are never followed out of it.
func TestR20WritableDifferential(t *testing.T) {
	aged(t) // listings of folders older than 30ms are kept: the walk's leaves get taken
	fuzzSeeds(t, "R20_SEEDS", 6, func(t *testing.T, seed uint64) int { return r20Fuzz(t, seed, 250) })
}

func r20Fuzz(t *testing.T, seed uint64, steps int) int {
	rng := rand.New(rand.NewPCG(seed, 20))
	f := newFixture(t)
	base := realTemp(t)
	root, err := os.OpenRoot(base)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f.ws, f.home = filepath.Join(base, "ws"), filepath.Join(base, "home")
	for _, d := range []string{"ws", "home", "home/.config", "home/.config/gh", "home/out", "other", "other/o"} {
		must(t, root.Mkdir(d, 0o755))
	}
	sb := fsSandbox([]string{"./**", "~/**"}, []string{"./**", "~/.config/gh/**", "~/out/**"}, []string{"./secret.txt"})
	in := f.input(sb)
	budgets := []int{0, 1}
	in.DenyBudget = budgets[seed%uint64(len(budgets))] // 1: the walk stops after 100 entries
	var rels []string
	for _, p := range []string{"a", "a/b", "a/b/c", "a/x.txt", "a/b/y", "a/b/c/z", "a/b/.git", "a/b/c/.git", "a/.git",
		"sub", "sub/.git", "sub/.git/hooks", "sub/m", ".vscode", ".idea", ".git", "secret.txt", "d", "d/e", "d/e/f", "many",
		// inside git directories: submodules' and worktrees' (gitDirMasks's walk)
		".git/HEAD", ".git/hooks", ".git/modules", ".git/modules/m", ".git/modules/m/HEAD", ".git/modules/m/hooks",
		".git/modules/m/modules/n/HEAD", ".git/worktrees", ".git/worktrees/w/HEAD", ".git/worktrees/w/config.worktree",
		"sub/.git/modules/k/HEAD", "sub/.git/modules/k/config"} {
		rels = append(rels, "ws/"+p)
	}
	for _, p := range []string{".config/gh/hosts.yml", ".config/gh/x", ".config/gh/x/.git", ".config/gh/x/y", "out/y", "out/y/z", "out/y/.git", "out/.vscode"} {
		rels = append(rels, "home/"+p)
	}
	rels = append(rels, "other/o", "other/o/.git", "other/p")
	targets := []string{"/etc", "/usr/bin", "/nonexistent/z"}
	for _, r := range rels {
		targets = append(targets, filepath.Join(base, r))
	}
	pick := func(l []string) string { return l[rng.IntN(len(l))] }
	c := NewCache()
	reusedAfterChange := 0
	var lastErr error
	opaqueRun, stopped, hits := 0, 0, keptSince()
	for step := range steps {
		if opaqueRun > 4 {
			// every compilation opaque (a large folder, a .git file that cannot be read): remove
			// every .git and large folder, through the root
			filepath.WalkDir(base, func(path string, d os.DirEntry, err error) error {
				if err == nil && (d.Name() == ".git" || d.Name() == "many") {
					if rel, err := filepath.Rel(base, path); err == nil {
						root.RemoveAll(rel)
					}
					return filepath.SkipDir
				}
				return nil
			})
			opaqueRun = 0
		}
		p := pick(rels)
		op := rng.IntN(14)
		if lastErr != nil && rng.IntN(3) != 0 {
			best := ""
			for _, r := range rels {
				if strings.Contains(lastErr.Error(), filepath.Join(base, r)) && len(r) > len(best) {
					best = r
				}
			}
			if best != "" {
				p, op = best, 0
			}
		}
		var what string
		switch op {
		case 0, 1:
			root.RemoveAll(p)
			what = "remove " + p
		case 2:
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.RemoveAll(p)
			root.WriteFile(p, []byte("x"), 0o644)
			what = "file " + p
		case 3, 4:
			root.MkdirAll(p, 0o755)
			what = "mkdir " + p
		case 5:
			tgt := pick(targets)
			if rng.IntN(2) == 0 {
				if rel, err := filepath.Rel(filepath.Dir(filepath.Join(base, p)), tgt); err == nil {
					tgt = rel
				}
			}
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.RemoveAll(p)
			root.Symlink(tgt, p)
			what = "link " + p + " -> " + tgt
		case 6:
			src := pick(rels)
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.Rename(src, p)
			what = "rename " + src + " onto " + p
		case 7:
			mode := []os.FileMode{0, 0o700, 0o755, 0o311}[rng.IntN(4)]
			root.Chmod(p, mode)
			what = fmt.Sprintf("chmod %v %s", mode, p)
		case 8:
			// a gitfile somewhere, pointing to a folder of the trees
			dir := pick(rels)
			root.MkdirAll(dir, 0o755)
			g := filepath.Join(dir, ".git")
			root.RemoveAll(g)
			root.WriteFile(g, []byte("gitdir: "+pick(targets)+"\n"), 0o644)
			what = "gitfile " + g
		case 9:
			// more entries than a small budget's walk reads
			dir := pick([]string{"ws/many", "ws/a/b", "home/out/y"})
			root.MkdirAll(dir, 0o755)
			for i := range 40 + rng.IntN(40) {
				root.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), nil, 0o644)
			}
			what = "many files in " + dir
		case 10:
			now := time.Now().Add(-time.Hour)
			root.Chtimes(p, now, now)
			what = "utimes " + p
		case 11:
			time.Sleep(2 * listingMargin) // what is there now gets kept at the next walk
			what = "nothing (aged)"
		default:
			what = "nothing"
		}
		for i := range 2 {
			want, wantErr, reused := compareThree(t, c, in, fmt.Sprintf("step %d (%s), call %d", step, what, i))
			lastErr = wantErr
			if want != nil && slices.ContainsFunc(want.Notes, func(n string) bool { return strings.Contains(n, "search for nested git directories stopped") }) {
				stopped++
			}
			if i == 0 && reused && !strings.HasPrefix(what, "nothing") {
				reusedAfterChange++
			}
			if i == 1 {
				j := &journal{}
				_, err := compileAsking(in, j)
				if os.Getenv("R20_DEBUG") != "" {
					t.Logf("step %d (%s): reused %v, err %v, opaque %q, %d questions", step, what, reused, err, j.opaque, len(j.questions))
				}
				if j.opaque != "" {
					opaqueRun++
				} else {
					opaqueRun = 0
				}
			}
		}
	}
	// leave nothing unreadable for t.TempDir's cleanup
	for _, r := range rels {
		root.Chmod(r, 0o755)
	}
	t.Logf("a kept policy was used right after %d changes; %d compilations stopped their walk at the budget; %d kept listings used", reusedAfterChange, stopped, hits())
	return reusedAfterChange
}
