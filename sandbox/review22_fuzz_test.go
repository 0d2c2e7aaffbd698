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

// TestR22DenyWalkDifferential: a randomized differential centred on the recorded listings of
// commit a16d173..7f8e246: grants whose last component is a wildcard (~/.config/git/*,
// ./conf/*.json), one-component denies (~/.ssh2/id_*), and **/NAME denies (**/.env, ./**/*.pem,
// ./**/{.secret,*.key}, ./**/\[x*). Files, folders and links named like the matches (to files,
// folders, outside, dangling), case variants, names with glob metacharacters, renames over, the
// static prefixes replaced by links or files, many entries against DenyBudget 1, pauses that let
// listings be kept. After every change: compareThree (cache, fresh, fresh reading every folder)
// three times, and denyWalk against the glob it replaced on the workspace (no match the glob masks
// may be missing from a complete walk). R22_SEEDS seeds (default 3) of 120 steps.
//
// Every change is made through an os.Root on the test's temp folder.
func TestR22DenyWalkDifferential(t *testing.T) {
	aged(t)
	fuzzSeeds(t, "R22_SEEDS", 3, func(t *testing.T, seed uint64) int { return r22Fuzz(t, seed, 120) })
}

var r22Denies = []string{"**/.env", "./**/*.pem", "./**/{.secret,*.key}", `./**/\[x*`, "~/.ssh2/id_*"}

func r22Fuzz(t *testing.T, seed uint64, steps int) int {
	rng := rand.New(rand.NewPCG(seed, 22))
	e := newR21(t)
	root := e.root
	e.write("ws/.env", "A=1")
	e.write("ws/src/main.go", "")
	e.write("ws/src/deep/x.pem", "")
	e.write("home/.ssh2/id_rsa", "K")
	e.write("home/.config/git/config", "")
	e.write("ws/conf/a.json", "")
	in := e.f.input(fsSandbox([]string{"./**", "~/.config/git/*", "./conf/*.json", "~/.ssh2/*"}, []string{"./out/**"}, r22Denies))
	in.DenyBudget = []int{0, 1}[seed%2]
	dirs := []string{"ws", "ws/src", "ws/src/deep", "ws/.hidden", "ws/conf", "ws/[x]", "ws/a{b", "ws/out",
		"home/.ssh2", "home/.config/git", "home/other"}
	names := []string{".env", ".ENV", ".Env", "x.pem", "X.PEM", ".secret", "a.key", "[x]", "[x", "\\[x", "*", "{a,b}",
		"id_rsa", "id_x", "ID_y", "c.json", "sub", ".hidden", "deep", "git", ".ssh2", "conf", "src", "e\\.env", "?"}
	targets := []string{"/etc", "/etc/hostname", "/usr/bin", "nowhere", e.abs("home/other"), e.abs("ws/src"), e.abs("ws/.env"),
		e.abs("home/.ssh2"), "..", "../..", "."}
	pick := func(l []string) string { return l[rng.IntN(len(l))] }
	c := NewCache()
	reusedAfter := 0
	for step := range steps {
		p := filepath.Join(pick(dirs), pick(names))
		var what string
		switch op := rng.IntN(14); op {
		case 0, 1:
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.RemoveAll(p)
			root.WriteFile(p, []byte("S"), 0o600)
			what = "file " + p
		case 2:
			root.RemoveAll(p)
			what = "remove " + p
		case 3:
			root.MkdirAll(p, 0o755)
			what = "mkdir " + p
		case 4, 5:
			tgt := pick(targets)
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.RemoveAll(p)
			root.Symlink(tgt, p)
			what = "link " + p + " -> " + tgt
		case 6:
			src := filepath.Join(pick(dirs), pick(names))
			root.MkdirAll(filepath.Dir(p), 0o755)
			if rng.IntN(2) == 0 {
				root.RemoveAll(p)
			}
			root.Rename(src, p)
			what = "rename " + src + " onto " + p
		case 7:
			// a static prefix (or a walked folder) replaced by a link, a file, or moved away and back
			d := pick(dirs[1:])
			switch rng.IntN(3) {
			case 0:
				root.RemoveAll(d + ".old")
				root.Rename(d, d+".old")
				root.Symlink(filepath.Base(d)+".old", d)
				what = "folder " + d + " moved, a link left"
			case 1:
				root.RemoveAll(d)
				root.WriteFile(d, []byte("f"), 0o644)
				what = "folder " + d + " a file"
			default:
				root.Remove(d)
				if _, err := root.Lstat(d + ".old"); err == nil {
					root.Rename(d+".old", d)
				}
				root.MkdirAll(d, 0o755)
				what = "folder " + d + " back"
			}
		case 8:
			d := pick(dirs)
			root.MkdirAll(d, 0o755)
			for i := range 30 + rng.IntN(50) {
				root.WriteFile(filepath.Join(d, fmt.Sprint("m", i)), nil, 0o644)
			}
			what = "many files in " + d
		case 9:
			d := pick(dirs)
			cur := d
			for i := range 4 + rng.IntN(6) {
				cur = filepath.Join(cur, fmt.Sprint("n", i))
			}
			root.MkdirAll(cur, 0o755)
			leaf := filepath.Join(cur, pick([]string{".env", "k.pem", "plain"}))
			root.WriteFile(leaf, nil, 0o600)
			what = "deep " + leaf
		case 10:
			time.Sleep(2 * listingMargin)
			what = "nothing (aged)"
		case 11:
			src := filepath.Join(pick(dirs), pick(names))
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.RemoveAll(p)
			root.Link(src, p)
			what = "hard link " + src + " at " + p
		case 12:
			// a folder renamed over a folder of the same name elsewhere: the parent's names unchanged
			a, b := pick(dirs[1:]), pick(dirs[1:])
			tmp := b + ".swap"
			root.RemoveAll(tmp)
			root.Rename(a, tmp)
			root.Rename(b, a)
			root.Rename(tmp, b)
			what = "swap " + a + " and " + b
		default:
			what = "nothing"
		}
		for i := range 3 {
			_, _, reused := compareThree(t, c, in, fmt.Sprintf("seed %d step %d (%s), call %d", seed, step, what, i))
			if i == 0 && reused && !strings.HasPrefix(what, "nothing") {
				reusedAfter++
			}
		}
		r22WalkAsGlob(t, e.ws, in.DenyBudget, fmt.Sprintf("seed %d step %d (%s)", seed, step, what))
		if os.Getenv("R22_DEBUG") != "" {
			j := &journal{}
			_, err := compileAsking(in, j)
			t.Logf("step %d (%s): err %v, opaque %q, %d questions", step, what, err, j.opaque, len(j.questions))
		}
	}
	return reusedAfter
}

// r22WalkAsGlob fails when, under root, a complete denyWalk masks less than the glob it replaced
// (a complete glob's matches all in the walk's).
func r22WalkAsGlob(t *testing.T, root string, budget int, where string) {
	t.Helper()
	if budget == 0 {
		budget = DefaultDenyBudget
	}
	if fi, err := os.Lstat(root); err != nil || !fi.IsDir() {
		return
	}
	for _, name := range []string{".env", "*.pem", "{.secret,*.key}", `\[x*`, "[x]", "*"} {
		c := &compiler{budget: budget, fs: newView(), notes: map[string]bool{}}
		var walked, globbed []string
		walkDone, err := c.denyWalk(root, name, func(rel string) error { walked = append(walked, rel); return nil })
		if err != nil {
			t.Fatalf("%s: denyWalk **/%s: %v", where, name, err)
		}
		globDone, gerr := c.expand(root, "**/"+name, func(rel string) error { globbed = append(globbed, rel); return nil })
		if gerr != nil {
			continue
		}
		if globDone && !walkDone {
			t.Errorf("%s: **/%s: the glob complete, the walk not", where, name)
		}
		if walkDone && globDone {
			for _, g := range globbed {
				if !slices.Contains(walked, g) {
					t.Errorf("%s: **/%s: the glob masks %s, the walk does not (walk %q)", where, name, g, walked)
				}
			}
		}
	}
}
