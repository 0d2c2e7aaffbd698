package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/clihost/clihost/manifest"
	"golang.org/x/sys/unix"
	"testing"
)

// TestR22MetaInWorkspacePath: a workspace (or home) whose own path holds a glob metacharacter.
// denyPattern joins the pattern to the workspace without escaping it, so the workspace's own name
// becomes part of the glob: "proj[1]" matches "proj1", never "proj[1]".
func TestR22MetaInWorkspacePath(t *testing.T) {
	for _, dir := range []string{"proj[1]", "my{app}", `a\b`, "star*", "q?"} {
		t.Run(dir, func(t *testing.T) {
			e := newR21(t)
			e.mkdir(dir)
			e.mkdir("hm" + dir)
			e.f.ws, e.f.home = e.abs(dir), e.abs("hm"+dir)
			e.write(filepath.Join(dir, ".env"), "SECRET=1")
			e.write(filepath.Join(dir, "sub", ".env"), "SECRET=2")
			e.write(filepath.Join("hm"+dir, ".ssh2", "id_x"), "KEY")
			in := e.f.input(fsSandbox([]string{"./**", "~/**"}, nil, []string{"./.env", "**/.env", "./sub/*.env", "~/.ssh2/id_*"}))
			p, err := Compile(in)
			if err != nil {
				t.Logf("compile refused (fails closed): %v", err)
				return
			}
			for _, pat := range []string{"./.env", "**/.env", "./sub/*.env", "~/.ssh2/id_*"} {
				in := e.f.input(fsSandbox([]string{"./**", "~/**"}, nil, []string{pat}))
				p, err := Compile(in)
				if err != nil {
					t.Logf("%s: compile refused (fails closed): %v", pat, err)
					continue
				}
				var missed []string
				for _, m := range []string{filepath.Join(e.f.ws, ".env"), filepath.Join(e.f.ws, "sub", ".env"), filepath.Join(e.f.home, ".ssh2", "id_x")} {
					if !deniedIn(p, m) {
						missed = append(missed, strings.TrimPrefix(m, e.base))
					}
				}
				t.Logf("deny %q, workspace %q: unmasked %q", pat, dir, missed)
			}
			for _, m := range []string{filepath.Join(e.f.ws, ".env"), filepath.Join(e.f.ws, "sub", ".env"), filepath.Join(e.f.home, ".ssh2", "id_x")} {
				if !deniedIn(p, m) {
					t.Errorf("workspace %q: %s is not masked by any of the four denies", dir, strings.TrimPrefix(m, e.base))
				}
			}
		})
	}
}

// TestR22WalkBoundVsGlob: the glob expand ran for **/NAME reads every folder twice (once for **,
// once to match NAME in it), so its entry bound is reached at half the tree denyWalk accepts. The
// walk is complete (every match masked) where the glob failed closed: not a mask lost.
func TestR22WalkBoundVsGlob(t *testing.T) {
	e := newR21(t)
	for i := range 60 {
		e.write(fmt.Sprintf("ws/d/f%02d", i), "")
	}
	e.write("ws/.env", "")
	c := &compiler{budget: 1, fs: newView(), notes: map[string]bool{}}
	var walked, globbed []string
	walkDone, err := c.denyWalk(e.ws, ".env", func(rel string) error { walked = append(walked, rel); return nil })
	must(t, err)
	globDone, err := c.expand(e.ws, "**/.env", func(rel string) error { globbed = append(globbed, rel); return nil })
	must(t, err)
	t.Logf("62 entries, budget 1 (bound 100): the walk complete %v masks %q; the glob complete %v masks %q", walkDone, walked, globDone, globbed)
	if !walkDone || !slices.Equal(walked, []string{".env"}) {
		t.Errorf("the walk of 62 entries (bound 100): complete %v, masks %q; want complete, .env", walkDone, walked)
	}
}

// TestR22BindMountOverWalkedFolder: a folder the **/.env walk listed (and whose listing may be
// kept) gets a bind mount over it between calls: first a copy with the same names (a .env only
// deeper), then one with a .env at its top; then the mount is removed again. The parent's
// listing is unchanged throughout. Every call must match a fresh compilation and mask the .env
// the mount shows. Skipped where mounting is not allowed; every mount is undone.
func TestR22BindMountOverWalkedFolder(t *testing.T) {
	aged(t)
	e := newR21(t)
	e.write("ws/src/main.go", "")
	e.write("ws/src/lib/util.go", "")
	e.write("ws/.env", "A=1")
	e.write("other/main.go", "")
	e.write("other/lib/util.go", "")
	e.write("other/lib/.env", "DEEP=1")
	e.write("top/main.go", "")
	e.write("top/.env", "TOP=1")
	in := e.f.input(fsSandbox([]string{"./**"}, nil, []string{"**/.env", "./**/*.pem"}))
	c := NewCache()
	e.settled(c, in, "before")
	target := e.abs("ws/src")
	mount := func(src string) {
		t.Helper()
		if err := unix.Mount(e.abs(src), target, "", unix.MS_BIND, ""); err != nil {
			t.Skipf("bind mount: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
	}
	mount("other")
	e.check(c, in, "a copy with a deeper .env mounted over ws/src", 0, filepath.Join(target, "lib", ".env"))
	e.settled(c, in, "mounted copy, settled")
	must(t, unix.Unmount(target, 0))
	e.check(c, in, "unmounted", 0)
	mount("top")
	e.check(c, in, "a folder with a .env at its top mounted", 0, filepath.Join(target, ".env"))
	e.settled(c, in, "mounted top, settled")
	// a mount over a folder below the walked one, while its parent's listing is kept
	must(t, unix.Unmount(target, 0))
	e.settled(c, in, "unmounted again")
	lib := e.abs("ws/src/lib")
	if err := unix.Mount(e.abs("other/lib"), lib, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(lib, unix.MNT_DETACH) })
	e.check(c, in, "other/lib mounted over ws/src/lib", 0, filepath.Join(lib, ".env"))
	must(t, unix.Unmount(lib, 0))
	e.check(c, in, "other/lib unmounted", 0)
}

// TestR22ExchangeFileAndFolder: renameat2(RENAME_EXCHANGE) swaps a file and a folder in the same
// walked folder: its names stay, their types swap. The walk must see the folder (now under the
// file's old name) and mask the .env in it, cache and fresh alike.
func TestR22ExchangeFileAndFolder(t *testing.T) {
	aged(t)
	e := newR21(t)
	e.write("ws/a", "plain")
	e.write("ws/b/.env", "SECRET=1")
	e.write("ws/src/x.go", "")
	in := e.f.input(fsSandbox([]string{"./**"}, nil, []string{"**/.env"}))
	c := NewCache()
	e.settled(c, in, "before")
	var before unix.Stat_t
	must(t, unix.Lstat(e.ws, &before))
	must(t, unix.Renameat2(unix.AT_FDCWD, e.abs("ws/a"), unix.AT_FDCWD, e.abs("ws/b"), unix.RENAME_EXCHANGE))
	var after unix.Stat_t
	must(t, unix.Lstat(e.ws, &after))
	t.Logf("ws ctime before %v after %v", before.Ctim, after.Ctim)
	e.check(c, in, "a and b exchanged", 0, e.abs("ws/a/.env"))
	e.settled(c, in, "exchanged, settled")
	// and across folders: ws/src (a folder) with home/x (a folder holding .env)
	e.write("home/x/.env", "S=2")
	e.settled(c, in, "home/x made")
	must(t, unix.Renameat2(unix.AT_FDCWD, e.abs("ws/src"), unix.AT_FDCWD, e.abs("home/x"), unix.RENAME_EXCHANGE))
	e.check(c, in, "ws/src exchanged with home/x", 0, e.abs("ws/src/.env"))
}

// TestR22WorkspaceAndHomeBehindLinks: the workspace and the home are moved away and replaced by
// links to folders holding the same names (so every listing by the old resolved path could still
// answer alike), then to folders with other matches; the cache must follow a fresh compile.
func TestR22WorkspaceAndHomeBehindLinks(t *testing.T) {
	aged(t)
	e := newR21(t)
	for _, top := range []string{"ws", "ws2", "ws3"} {
		e.write(top+"/.env", "A")
		e.write(top+"/src/k.pem", "K")
		e.write(top+"/conf/a.json", "{}")
	}
	e.write("ws3/src/deeper/.env", "B")
	for _, top := range []string{"home", "home2"} {
		e.write(top+"/.ssh2/id_rsa", "K")
		e.write(top+"/.config/git/config", "")
	}
	e.write("home2/.ssh2/id_other", "K2")
	in := e.f.input(fsSandbox([]string{"./**", "~/.config/git/*", "./conf/*.json"}, nil, []string{"**/.env", "./**/*.pem", "~/.ssh2/id_*"}))
	c := NewCache()
	e.settled(c, in, "before")
	e.rename("ws", "ws.orig")
	e.link("ws2", "ws")
	e.check(c, in, "ws a link to ws2 (same names)", 0, e.abs("ws2/.env"), e.abs("ws2/src/k.pem"))
	e.settled(c, in, "ws -> ws2 settled")
	e.link("ws3", "ws")
	e.check(c, in, "ws a link to ws3", 0, e.abs("ws3/src/deeper/.env"))
	e.rename("home", "home.orig")
	e.link("home2", "home")
	e.check(c, in, "home a link to home2", 0, e.abs("home2/.ssh2/id_other"), e.abs("home2/.ssh2/id_rsa"))
	e.settled(c, in, "home -> home2 settled")
	e.remove("home")
	e.rename("home.orig", "home")
	e.check(c, in, "home back", 0, e.abs("home/.ssh2/id_rsa"))
}

// TestR22DotAltsVsGlob: NAME patterns whose alternatives name the folder itself ({.,x}, {..,x})
// matched every folder through the glob expand (masking the whole tree), where denyWalk matches
// only entry names: the manifest's pattern check now refuses them. {.env,} stays allowed, and the
// walk masks what the glob masks.
func TestR22DotAltsVsGlob(t *testing.T) {
	e := newR21(t)
	e.write("ws/.env", "A")
	e.write("ws/sub/x", "B")
	for _, name := range []string{"{.,x}", "{..,x}"} {
		if _, err := manifest.ClassifyPattern("./**/" + name); err == nil {
			t.Errorf("./**/%s was accepted", name)
		}
	}
	c := &compiler{budget: DefaultDenyBudget, fs: newView(), notes: map[string]bool{}}
	var walked, globbed []string
	walkDone, err := c.denyWalk(e.ws, "{.env,}", func(rel string) error { walked = append(walked, rel); return nil })
	must(t, err)
	globDone, err := c.expand(e.ws, "**/{.env,}", func(rel string) error { globbed = append(globbed, rel); return nil })
	must(t, err)
	for _, g := range globbed {
		if g != "" && g != "." && (!walkDone || !globDone || !slices.Contains(walked, g)) {
			t.Errorf("**/{.env,}: the glob masks %q, the walk (%q) does not", g, walked)
		}
	}
}

// TestR22DotAltCompiled: the same at the level of Compile: fs.deny "./**/{.,x}" and
// "~/.ssh2/{.,id_*}" masked the folder itself when expand ran them; they are refused now (the
// compilation fails closed, naming the pattern).
func TestR22DotAltCompiled(t *testing.T) {
	e := newR21(t)
	e.write("ws/.env", "A")
	e.write("ws/sub/x", "B")
	e.write("home/.ssh2/id_rsa", "K")
	e.write("home/.ssh2/known_hosts", "H")
	for _, pat := range []string{"./**/{.,x}", "~/.ssh2/{.,id_*}"} {
		if _, err := Compile(e.f.input(fsSandbox([]string{"./**", "~/**"}, nil, []string{pat}))); err == nil || !strings.Contains(err.Error(), "alternative") {
			t.Errorf("deny %q: %v, want a refusal", pat, err)
		}
	}
}
