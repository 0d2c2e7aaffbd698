package sandbox

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/clihost/clihost/manifest"
)

// TestR18RandomDifferential changes a workspace, a home and a PATH folder at random (files,
// folders, links absolute, relative and dangling, hard links, exec and set-id bits, scripts with
// other interpreters, renames over other paths, the caller's variables) and compares, after
// every change, Cache.Compile with a fresh Compile. Every change is followed by two calls, so
// that a kept policy is tried against the changed tree. Content changes always change a
// script's size, so that the test does not depend on the racy window (set to 0).
//
// Every change is made through an os.Root on the folder holding the three trees: the links the
// test plants (to /usr/bin/ls, /etc, …) are never followed out of it.
func TestR18RandomDifferential(t *testing.T) {
	// a longer run: R18_SEEDS=200
	fuzzSeeds(t, "R18_SEEDS", 8, func(t *testing.T, seed uint64) int { return r18Fuzz(t, seed, 300) })
}

func r18Fuzz(t *testing.T, seed uint64, steps int) int {
	rng := rand.New(rand.NewPCG(seed, 18))
	f := newFixture(t)
	base := realTemp(t)
	root, err := os.OpenRoot(base)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f.ws, f.home = filepath.Join(base, "ws"), filepath.Join(base, "home")
	for _, d := range []string{"ws", "home", "tools"} {
		if err := root.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := root.WriteFile("tools/helper", []byte("#!/usr/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TOKEN": "one"}
	allow := true
	sb := manifest.Sandbox{
		FS: &manifest.FS{Read: []string{"./**", "~/**", "./pub.txt", "~/notes"}, Write: []string{"./out.txt", "~/state.json"},
			Deny: []string{"./secret.txt", "./.env", "./keys"}},
		Exec: &manifest.Exec{Allow: &allow, Spawn: []string{"helper", "h2"}},
		Env:  &manifest.Env{Pass: []string{"TOKEN"}},
	}
	in := f.input(sb)
	in.PATH = filepath.Join(base, "tools") + ":/usr/bin"
	in.LookupEnv = func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	in.Protect = []string{filepath.Join(f.ws, "bundles")}
	var rels []string // relative to base
	for _, p := range []string{"secret.txt", ".env", "keys", "keys/k", "pub.txt", "out.txt", "sub", "sub/x", "bundles", "a", "b"} {
		rels = append(rels, "ws/"+p)
	}
	for _, p := range []string{".aws", ".ssh", ".config", ".config/gh", ".config/git", ".config/git/config", ".local", ".local/bin",
		"bin", ".gitconfig", ".bashrc", "notes", "state.json", "store", "store/y", "x"} {
		rels = append(rels, "home/"+p)
	}
	rels = append(rels, "tools/helper", "tools/h2", "tools/d", "tools/d/h2")
	var targets []string
	for _, r := range rels {
		targets = append(targets, filepath.Join(base, r))
	}
	targets = append(targets, "/usr/bin/ls", "/usr/bin/env", "/usr/bin", "/etc", "/nonexistent/z")
	pick := func(l []string) string { return l[rng.IntN(len(l))] }
	counter := 0
	content := func() []byte {
		counter++
		interp := pick([]string{"/usr/bin/sh", "/usr/bin/env h2", "/usr/bin/env -S helper x", "/usr/bin/ls", "/usr/bin/env"})
		return []byte("#!" + interp + "\n#" + strings.Repeat("x", counter) + "\n")
	}
	c := NewCache()
	reusedAfterChange, opaque, failed := 0, 0, 0
	var lastErr error
	for step := range steps {
		p := pick(rels)
		op := rng.IntN(11)
		if lastErr != nil && rng.IntN(4) != 0 {
			// repair: remove the longest of the test's paths the error names, so that the
			// trees leave a failing state and kept policies get tried again
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
		case 0:
			root.RemoveAll(p)
			what = "remove " + p
		case 1:
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.RemoveAll(p)
			root.WriteFile(p, content(), 0o644)
			what = "file " + p
		case 2:
			root.MkdirAll(p, 0o755)
			what = "mkdir " + p
		case 3, 4:
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
		case 5:
			src := pick(rels)
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.RemoveAll(p)
			root.Link(src, p)
			what = "hard link " + p + " = " + src
		case 6:
			mode := []os.FileMode{0o644, 0o755, 0o700, 0o755 | os.ModeSetuid, 0}[rng.IntN(5)]
			root.Chmod(p, mode)
			what = fmt.Sprintf("chmod %v %s", mode, p)
		case 7:
			if fd, err := root.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
				fd.Write(content())
				fd.Close()
			}
			what = "rewrite " + p
		case 8:
			src := pick(rels)
			root.MkdirAll(filepath.Dir(p), 0o755)
			root.Rename(src, p)
			what = "rename " + src + " onto " + p
		case 9:
			name := pick([]string{"TOKEN", "XDG_RUNTIME_DIR", "SSH_AUTH_SOCK", "XDG_CONFIG_HOME"})
			if rng.IntN(3) == 0 {
				delete(env, name)
			} else {
				env[name] = pick(targets)
			}
			what = "env " + name + "=" + env[name]
		case 10:
			what = "nothing"
		}
		for i := range 2 {
			before := c.Reused()
			got, gotErr := c.Compile(in)
			want, wantErr := Compile(in)
			if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Fatalf("step %d (%s), call %d: the cache says %v, a compilation %v", step, what, i, gotErr, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d (%s), call %d: the cache's policy differs:\n cache: %+v\n fresh: %+v", step, what, i, got, want)
			}
			reused := c.Reused() > before
			lastErr = wantErr
			switch {
			case i == 0 && reused && what != "nothing":
				reusedAfterChange++
			case i == 1 && wantErr != nil:
				failed++
				if os.Getenv("R18_DEBUG") != "" {
					t.Logf("step %d (%s): %v", step, what, wantErr)
				}
			case i == 1 && !reused:
				opaque++
			}
		}
	}
	t.Logf("a kept policy was used right after %d changes; later calls: %d failed, %d not reused (opaque)", reusedAfterChange, failed, opaque)
	return reusedAfterChange
}
