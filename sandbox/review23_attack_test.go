package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	fx "github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// Review 23: attacks on the watcher that spares a kept policy's lstat and readlink questions.
//
// SAFETY: every file change goes through r23Env.root, an os.Root on the test's own temp folder
// (links the test plants are never followed out of it); mounts are made only on paths checked
// (lstat, no link, under the temp folder) and are undone by the test.

type r23Env struct {
	t    *testing.T
	base string
	root *os.Root
	f    *fixture
}

func newR23(t *testing.T) *r23Env {
	t.Helper()
	base := realTemp(t)
	var st unix.Statfs_t
	if err := unix.Statfs(base, &st); err != nil || !watchableFS[int64(st.Type)] {
		fx.Missing(t, "the temp folder is not on a file system the watcher trusts")
	}
	root, err := os.OpenRoot(base)
	must(t, err)
	t.Cleanup(func() { root.Close() })
	f := newFixture(t)
	e := &r23Env{t: t, base: base, root: root, f: f}
	for _, d := range []string{"ws", "home", "keep", "elsewhere"} {
		must(t, root.Mkdir(d, 0o755))
	}
	f.ws, f.home = e.abs("ws"), e.abs("home")
	return e
}

func (e *r23Env) abs(rel string) string { return filepath.Join(e.base, rel) }

func (e *r23Env) write(rel, content string) {
	e.t.Helper()
	must(e.t, e.root.MkdirAll(filepath.Dir(rel), 0o755))
	must(e.t, e.root.WriteFile(rel, []byte(content), 0o644))
}

// inside returns the absolute path of rel after checking that it and every folder above it up to
// base exist and are not links (a path safe to mount on).
func (e *r23Env) inside(rel string) string {
	e.t.Helper()
	p := e.abs(rel)
	if !strings.HasPrefix(p, e.base+"/") {
		e.t.Fatalf("%s is not inside %s", p, e.base)
	}
	for d := p; d != e.base; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil || fi.Mode()&os.ModeSymlink != 0 {
			e.t.Fatalf("%s: not a plain path inside the temp folder (%v)", d, err)
		}
	}
	return p
}

// r23Call calls c.Compile(in) and Compile(in); it reports whether the cache spared the
// questions, and fails the test (as a finding) when the policies differ.
func r23Call(t *testing.T, c *Cache, in Input, step string) (spared, differs bool) {
	t.Helper()
	before := c.Watched()
	got, gotErr := c.Compile(in)
	want, wantErr := Compile(in)
	spared = c.Watched() > before
	if (gotErr == nil) != (wantErr == nil) {
		t.Errorf("%s: DEFECT: the cache's error %v, a fresh compilation's %v (spared %v)", step, gotErr, wantErr, spared)
		return spared, true
	}
	if gotErr == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("%s: DEFECT: the cache's policy (spared: %v) differs from a fresh compilation's:%s", step, spared, r23Diff(got, want))
		return spared, true
	}
	return spared, false
}

// r23Settle compiles, checks in full, and reaches the spared path.
func r23Settle(t *testing.T, c *Cache, in Input, step string) {
	t.Helper()
	// Other work on the machine may touch a folder above the temp folder (/tmp): retry.
	for i := 0; i < 200; i++ {
		if spared, _ := r23Call(t, c, in, step); spared {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: the cache never spared the policy's questions", step)
}

// TestR23StaleWatchAfterFileRenamedAway: the watcher's map path → watch is kept until the kernel
// drops the watch (IN_IGNORED). A denied file renamed out of the workspace stays alive, and so
// does its watch; the new file made at its name is then "watched" by the old file's watch. A hard
// link made to the new file from a folder no answer depends on changes its link count (an lstat
// answer, and the policy's hard-link note) and raises IN_ATTRIB on the new inode only, which no
// watch holds: the kept policy is served without the note.
func TestR23StaleWatchAfterFileRenamedAway(t *testing.T) {
	e := newR23(t)
	e.write("ws/public.txt", "public")
	e.write("ws/keys.pem", "old key")
	in := e.f.input(fsSandbox([]string{"./public.txt"}, nil, []string{"./keys.pem"}))
	c := NewCache()
	r23Settle(t, c, in, "first")

	// The old keys.pem is moved to keep/ (alive: its watch stays, w.wds still maps the path to it).
	must(t, e.root.Rename("ws/keys.pem", "keep/keys.old"))
	e.write("ws/keys.pem", "new key")
	r23Settle(t, c, in, "after the replacement")

	// A hard link to the new keys.pem from an unwatched folder.
	must(t, e.root.Link("ws/keys.pem", "elsewhere/k"))
	spared, differs := r23Call(t, c, in, "after a hard link to the new keys.pem")
	if !differs {
		t.Logf("held (spared %v)", spared)
	} else if !spared {
		t.Errorf("the difference was not reached through the spared path")
	}
}

// TestR23StaleWatchAfterFolderReplaced: the same for a folder above: ws/conf is renamed out of
// the workspace and made anew; the new policy's watches of ws/conf and ws/conf/* were the old
// ones (on keep/conf.old), so any change inside the new ws/conf was unseen: the denied
// conf/secret.pem replaced by a link into the workspace, the granted conf/app.toml by a link to
// another file, or to a file outside the workspace (which a fresh compilation refuses).
func TestR23StaleWatchAfterFolderReplaced(t *testing.T) {
	for _, tc := range []struct {
		name, step     string
		files          []string // besides conf/app.toml
		deny           []string
		linkTo, linkAt string // what the link made in the new conf points to, and where
	}{
		{"denied file made a link", "the denied conf/secret.pem made a link to real/secret.pem",
			[]string{"ws/real/secret.pem", "ws/conf/secret.pem"}, []string{"./conf/secret.pem"}, "../real/secret.pem", "ws/conf/secret.pem"},
		{"grant made a link", "the granted conf/app.toml made a link to other.toml",
			[]string{"ws/other.toml"}, nil, "../other.toml", "ws/conf/app.toml"},
		{"grant made a link outside", "the granted conf/app.toml made a link to ../../elsewhere/private.txt",
			[]string{"elsewhere/private.txt"}, nil, "../../elsewhere/private.txt", "ws/conf/app.toml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newR23(t)
			e.write("ws/public.txt", "public")
			e.write("ws/conf/app.toml", "a")
			for _, f := range tc.files {
				e.write(f, f)
			}
			in := e.f.input(fsSandbox([]string{"./public.txt", "./conf/app.toml"}, nil, tc.deny))
			c := NewCache()
			r23Settle(t, c, in, "first")

			must(t, e.root.Rename("ws/conf", "keep/conf.old"))
			for _, f := range append([]string{"ws/conf/app.toml"}, tc.files...) {
				if strings.HasPrefix(f, "ws/conf/") {
					e.write(f, f)
				}
			}
			r23Settle(t, c, in, "after conf was replaced")

			must(t, e.root.Remove(tc.linkAt))
			must(t, e.root.Symlink(tc.linkTo, tc.linkAt))
			if spared, differs := r23Call(t, c, in, tc.step); differs && !spared {
				t.Errorf("the difference was not reached through the spared path")
			}
		})
	}
}

// TestR23StaleWatchAfterBindMount: a bind mount over a watched file changes the mount table (the
// next call checks in full and compiles anew), but the watch kept for its path is the covered
// file's: the mounted file's own changes (its link count, through a hard link from an unwatched
// folder) are then unseen, the mount table unchanged since.
func TestR23StaleWatchAfterBindMount(t *testing.T) {
	fx.NeedRoot(t)
	e := newR23(t)
	e.write("ws/public.txt", "public")
	e.write("ws/keys.pem", "covered")
	e.write("elsewhere/src.pem", "mounted")
	in := e.f.input(fsSandbox([]string{"./public.txt"}, nil, []string{"./keys.pem"}))
	c := NewCache()
	r23Settle(t, c, in, "first")

	must(t, e.root.Mkdir("elsewhere2", 0o755)) // not a folder any answer passed through
	umount := bindMount(t, e.inside("elsewhere/src.pem"), e.inside("ws/keys.pem"))
	defer umount()
	r23Settle(t, c, in, "after the bind mount")

	must(t, e.root.Link("elsewhere/src.pem", "elsewhere2/k"))
	spared, differs := r23Call(t, c, in, "after a hard link to the mounted file")
	t.Logf("spared %v differs %v", spared, differs)
	if differs && !spared {
		t.Errorf("the difference was not reached through the spared path")
	}
}

// TestR23Held: changes that inotify reports on a watch the policy holds (control cases): a hard
// link and RENAME_EXCHANGE with a file in an unwatched folder, chmod through an O_PATH-less fd
// opened elsewhere, a file replaced via O_TMPFILE+linkat; each must make the next call check in
// full (never spare), and the policy must equal a fresh one.
func TestR23Held(t *testing.T) {
	e := newR23(t)
	e.write("ws/public.txt", "public")
	e.write("ws/keys.pem", "key")
	e.write("elsewhere/other", "x")
	in := e.f.input(fsSandbox([]string{"./public.txt"}, nil, []string{"./keys.pem"}))
	c := NewCache()
	r23Settle(t, c, in, "first")
	steps := []struct {
		name   string
		change func()
	}{
		{"hard link from an unwatched folder", func() { must(t, e.root.Link("ws/keys.pem", "elsewhere/k1")) }},
		{"that link removed", func() { must(t, e.root.Remove("elsewhere/k1")) }},
		{"rename over a hard link elsewhere", func() {
			must(t, e.root.Link("ws/keys.pem", "elsewhere/k2"))
			r23Settle(t, c, in, "settle k2")
			must(t, e.root.Rename("elsewhere/other", "elsewhere/k2"))
		}},
		{"RENAME_EXCHANGE with a file elsewhere", func() {
			e.write("elsewhere/x", "x")
			r23Settle(t, c, in, "settle x")
			a, b := e.inside("ws/keys.pem"), e.inside("elsewhere/x")
			must(t, unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE))
		}},
		{"chmod through an fd", func() {
			fd, err := e.root.Open("ws/keys.pem")
			must(t, err)
			defer fd.Close()
			must(t, fd.Chmod(0o640))
		}},
		{"O_TMPFILE linked into an unwatched folder, then renamed over keys.pem", func() {
			dir, err := e.root.Open("elsewhere")
			must(t, err)
			defer dir.Close()
			fd, err := unix.Openat(int(dir.Fd()), ".", unix.O_TMPFILE|unix.O_WRONLY, 0o600)
			if err != nil {
				t.Skipf("O_TMPFILE: %v", err)
			}
			defer unix.Close(fd)
			must(t, unix.Linkat(fd, "", int(dir.Fd()), "tmp", unix.AT_EMPTY_PATH))
			must(t, e.root.Rename("elsewhere/tmp", "ws/keys.pem"))
		}},
	}
	for _, s := range steps {
		s.change()
		if spared, _ := r23Call(t, c, in, s.name); spared {
			t.Errorf("%s: spared although a watched file changed", s.name)
		}
		r23Settle(t, c, in, s.name+": settle")
	}
}

// r23Diff names what differs between the cache's policy a and a fresh one b.
func r23Diff(a, b *Policy) string {
	rules := func(p *Policy) []string {
		var out []string
		for _, r := range p.Rules {
			out = append(out, fmt.Sprintf("%s:%d:%v", r.Path, r.Access, r.Subtree))
		}
		return out
	}
	s := ""
	for _, l := range []struct {
		name string
		x, y []string
	}{{"Rules", rules(a), rules(b)}, {"Deny", a.Deny, b.Deny}, {"Exec", a.Exec, b.Exec}, {"Writable", a.Writable, b.Writable}, {"Notes", a.Notes, b.Notes}} {
		var x, y []string
		for _, e := range l.x {
			if !slices.Contains(l.y, e) {
				x = append(x, e)
			}
		}
		for _, e := range l.y {
			if !slices.Contains(l.x, e) {
				y = append(y, e)
			}
		}
		if len(x)+len(y) > 0 {
			s += fmt.Sprintf("\n %s only in the cache's: %q; only in the fresh one: %q", l.name, x, y)
		}
	}
	if s == "" {
		s = policyDiff(a, b)
	}
	return s
}
