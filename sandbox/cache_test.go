package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/clihost/clihost/manifest"
)

// cacheCheck compiles in through c and afresh, and fails when the two policies (or errors) differ
// or when c reused a kept policy other than when reuse says. It returns the fresh policy.
func cacheCheck(t *testing.T, c *Cache, in Input, step string, reuse bool) *Policy {
	t.Helper()
	before := c.Reused()
	got, gotErr := c.Compile(in)
	want, wantErr := Compile(in)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%s: the cache says %v, a compilation %v", step, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: the cache's policy differs from a compilation's:\n cache: %+v\n fresh: %+v", step, got, want)
	}
	if reused := c.Reused() > before; reused != reuse {
		t.Errorf("%s: reused a kept policy: %v, want %v", step, reused, reuse)
	}
	return want
}

// TestCacheAnswersAsCompile changes, one after the other, what a compilation reads (a credential
// folder that appears as a link or is pointed elsewhere, a denied file made a link, a binary
// rewritten in place with another interpreter, the caller's variables, a folder on PATH created,
// a hard link, an exec bit, the workspace moved behind a link) and checks that the cache's policy
// is then the one a compilation returns, never the kept one; and that, unchanged, it is reused.
func TestCacheAnswersAsCompile(t *testing.T) {
	f := newFixture(t)
	tools := realTemp(t)
	script := filepath.Join(tools, "tool")
	write(t, script, "#!/usr/bin/sh\n", 0o755)
	write(t, filepath.Join(tools, "helper"), "#!/usr/bin/sh\n", 0o755)
	write(t, filepath.Join(f.ws, "public.txt"), "public", 0o644)
	write(t, filepath.Join(f.ws, "secret.txt"), "secret", 0o644)
	write(t, filepath.Join(f.ws, "keys.pem"), "key", 0o600)
	write(t, filepath.Join(f.ws, "out.txt"), "", 0o644)
	mkdir(t, filepath.Join(f.home, "store"))
	mkdir(t, filepath.Join(f.home, "other"))
	env := map[string]string{"TOKEN": "one", "PATH": "/usr/bin"}
	allow := true
	sb := manifest.Sandbox{
		FS:   &manifest.FS{Read: []string{"./**", "~/**"}, Write: []string{"./out.txt"}, Deny: []string{"./secret.txt", "./keys.pem"}},
		Exec: &manifest.Exec{Allow: &allow, Spawn: []string{"helper"}},
		Env:  &manifest.Env{Pass: []string{"TOKEN"}},
	}
	in := f.input(sb)
	in.Binary, in.PATH = script, tools
	in.LookupEnv = func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	in.Protect = []string{filepath.Join(f.ws, "bundles")}
	c := NewCache()
	last := cacheCheck(t, c, in, "first call", false)
	cacheCheck(t, c, in, "second call", true)

	changes := []struct {
		name    string
		change  func()
		differs bool // the policy differs after the change (else only the answers do)
	}{
		{"~/.aws appears, a link to ~/store", func() { symlink(t, filepath.Join(f.home, "store"), filepath.Join(f.home, ".aws")) }, true},
		{"~/.aws now points to ~/other", func() {
			os.Remove(filepath.Join(f.home, ".aws"))
			symlink(t, filepath.Join(f.home, "other"), filepath.Join(f.home, ".aws"))
		}, true},
		{"the denied secret.txt is a link to public.txt", func() {
			os.Remove(filepath.Join(f.ws, "secret.txt"))
			symlink(t, "public.txt", filepath.Join(f.ws, "secret.txt"))
		}, true},
		{"the binary rewritten in place (same size) with another interpreter", func() { rewriteInPlace(t, script, "#!/usr/bin/ls\n") }, true},
		{"TOKEN changed", func() { env["TOKEN"] = "two" }, true},
		{"XDG_RUNTIME_DIR set", func() { env["XDG_RUNTIME_DIR"] = filepath.Join(f.home, "run") }, true},
		{"TOKEN unset", func() { delete(env, "TOKEN") }, true},
		{"~/.local/bin made", func() { mkdir(t, filepath.Join(f.home, ".local", "bin")) }, true},
		{"a hard link to the denied keys.pem", func() {
			if err := os.Link(filepath.Join(f.ws, "keys.pem"), filepath.Join(f.ws, "keys-copy")); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"the spawned helper loses its exec bits", func() {
			if err := os.Chmod(filepath.Join(tools, "helper"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"~/.gitconfig appears, a link", func() {
			write(t, filepath.Join(f.home, "other", "gitconfig"), "", 0o644)
			symlink(t, filepath.Join(f.home, "other", "gitconfig"), filepath.Join(f.home, ".gitconfig"))
		}, true},
		{"a protected path appears", func() { mkdir(t, filepath.Join(f.ws, "bundles")) }, false},
		{"the workspace moved behind a link", func() {
			moved := f.ws + ".moved"
			if err := os.Rename(f.ws, moved); err != nil {
				t.Fatal(err)
			}
			symlink(t, moved, f.ws)
		}, true},
	}
	for _, ch := range changes {
		ch.change()
		now := cacheCheck(t, c, in, ch.name, false)
		if ch.differs && reflect.DeepEqual(now, last) {
			t.Errorf("%s: the policy did not change: the step proves nothing", ch.name)
		}
		last = cacheCheck(t, c, in, ch.name+", then again", true)
	}

	// What a compilation does not read: a new file in the workspace (its folder's times change).
	write(t, filepath.Join(f.ws+".moved", "new.txt"), "new", 0o644)
	cacheCheck(t, c, in, "a new file in the workspace", true)
}

// TestCacheWritableFolder: a tool that may write its workspace (searched for git directories at
// each compilation) reuses its policy while no folder of the workspace changed, and compiles
// afresh after each change a walk would see: a file made in the top folder or in a subfolder, a
// subfolder made, a subfolder replaced by a link, a mask path (.vscode) made, which the call's
// own state (present) must show, and a .git made (see cache_git_test.go for git work trees).
func TestCacheWritableFolder(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "a.txt"), "a", 0o644)
	write(t, filepath.Join(f.ws, "src", "deep", "b.go"), "b", 0o644)
	in := f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil))
	c := NewCache()
	cacheCheck(t, c, in, "first call", false)
	cacheCheck(t, c, in, "second call", true)
	for _, ch := range []struct {
		name   string
		change func()
	}{
		{"a file made in the top folder", func() { write(t, filepath.Join(f.ws, "new.txt"), "n", 0o644) }},
		{"a file made two folders down", func() { write(t, filepath.Join(f.ws, "src", "deep", "c.go"), "c", 0o644) }},
		{"a subfolder made", func() { mkdir(t, filepath.Join(f.ws, "src", "other")) }},
		{"a subfolder replaced by a link", func() {
			if err := os.RemoveAll(filepath.Join(f.ws, "src", "other")); err != nil {
				t.Fatal(err)
			}
			symlink(t, f.home, filepath.Join(f.ws, "src", "other"))
		}},
		{".vscode made (a mask path of the writable root)", func() { mkdir(t, filepath.Join(f.ws, ".vscode")) }},
	} {
		ch.change()
		cacheCheck(t, c, in, ch.name, false)
		cacheCheck(t, c, in, ch.name+", then again", true)
	}
	mkdir(t, filepath.Join(f.ws, "src", "deep", ".git"))
	wantIn(t, "Deny", cacheCheck(t, c, in, "a .git made two folders down", false).Deny, filepath.Join(f.ws, "src", "deep", ".git", "hooks"))
	cacheCheck(t, c, in, "a .git made two folders down, then again", true)
}

// TestCacheWritableFolderKeptLeaves: with the folders' listings kept (aged), a walk takes an
// unchanged folder without subfolders for a leaf and does not open it. A .git made in such a
// folder must make the next call compile afresh, and mask it, never reuse the policy kept when the
// folder was a leaf.
func TestCacheWritableFolderKeptLeaves(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "src", "deep", "b.go"), "b", 0o644)
	in := f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil))
	aged(t)
	c := NewCache()
	cacheCheck(t, c, in, "first call (its walk keeps the listings)", false)
	cacheCheck(t, c, in, "second call (src/deep is a leaf now)", false)
	cacheCheck(t, c, in, "third call", true)
	mkdir(t, filepath.Join(f.ws, "src", "deep", ".git"))
	p := cacheCheck(t, c, in, "a .git made in the leaf", false)
	wantIn(t, "Deny", p.Deny, filepath.Join(f.ws, "src", "deep", ".git", "hooks"))
}

// TestCacheFollowsTheBinary: a kept policy whose compilation read the binary (its interpreter),
// written just before, is not used once the binary is rewritten in place with another
// interpreter of the same length, within the same tick of the file system's clock or not.
func TestCacheFollowsTheBinary(t *testing.T) {
	f := newFixture(t)
	script := filepath.Join(realTemp(t), "tool") // a path no compilation read before, written now
	write(t, script, "#!/usr/bin/sh\n", 0o755)
	in := f.input(fsSandbox(nil, nil, nil))
	in.Binary = script
	c := NewCache()
	before := cacheCheck(t, c, in, "first call", false)
	cacheCheck(t, c, in, "second call", true)
	rewriteInPlace(t, script, "#!/usr/bin/ls\n")
	if after := cacheCheck(t, c, in, "after the rewrite", false); reflect.DeepEqual(after.Exec, before.Exec) {
		t.Errorf("the rewrite did not change Exec (%v): the test proves nothing", after.Exec)
	}
}

// TestCacheKeysTheEnvironment: a policy compiled without the caller's environment is not the
// policy of a call that has one (whose variables it would have read).
func TestCacheKeysTheEnvironment(t *testing.T) {
	f := newFixture(t)
	in := f.input(manifest.Sandbox{Env: &manifest.Env{Pass: []string{"TOKEN"}}})
	c := NewCache()
	cacheCheck(t, c, in, "without an environment", false)
	in.LookupEnv = func(name string) (string, bool) { return "set", name == "TOKEN" }
	wantIn(t, "Env", cacheCheck(t, c, in, "with one", false).Env, "TOKEN=set")
	cacheCheck(t, c, in, "with one, again", true)
}

// TestCacheKeepsNoOpaqueCompilation: a compilation that listed more of a writable tree than a
// journal keeps, or walked folders for a deny glob other than NAME or **/NAME (./*/*.pem), is never
// reused, however often it is asked again.
func TestCacheKeepsNoOpaqueCompilation(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "a.txt"), "a", 0o644)
	write(t, filepath.Join(f.ws, "sub", "b.pem"), "b", 0o644)
	large := newFixture(t) // more entries than a journal keeps (maxListedBytes)
	for i := range maxListedBytes / keptEntryBytes {
		write(t, filepath.Join(large.ws, "many", fmt.Sprintf("f%05d", i)), "", 0o644)
	}
	for name, in := range map[string]Input{
		"a writable tree of too many entries": large.input(fsSandbox(nil, []string{"./**"}, nil)),
		"a deny glob of two components":       f.input(fsSandbox([]string{"./**"}, nil, []string{"./*/*.pem"})),
	} {
		c := NewCache()
		for i := range 3 {
			cacheCheck(t, c, in, name+", call "+string(rune('1'+i)), false)
		}
	}
}

// TestCacheConcurrentCalls compiles one input from several goroutines at once (run with -race):
// each gets a policy of its own, equal to a compilation's.
func TestCacheConcurrentCalls(t *testing.T) {
	f := newFixture(t)
	in := f.input(fsSandbox([]string{"./**"}, []string{"./out.txt"}, nil))
	write(t, filepath.Join(f.ws, "out.txt"), "", 0o644)
	want := f.compile(in)
	c := NewCache()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				p, err := c.Compile(in)
				if err != nil {
					t.Error(err)
					return
				}
				if !reflect.DeepEqual(p, want) {
					t.Errorf("a concurrent call's policy differs: %+v", p)
					return
				}
				p.Rules[0].Path, p.Notes = "/changed", append(p.Notes, "changed") // the caller's own copy
			}
		})
	}
	wg.Wait()
	if c.Reused() == 0 {
		t.Error("no call reused a kept policy")
	}
}

// TestCacheWildcards: a grant with a wildcard in its last component (~/.config/git/*) and a deny
// pattern of one component (~/.ssh/id_*) list one folder each, recorded: the policy is reused while
// the folders hold the same names, and compiled afresh when a match appears or goes, the new match
// granted or masked.
func TestCacheWildcards(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.home, ".config", "git", "config"), "", 0o644)
	write(t, filepath.Join(f.home, ".ssh", "id_ed25519"), "k", 0o600)
	write(t, filepath.Join(f.home, ".ssh", "known_hosts"), "", 0o644)
	in := f.input(fsSandbox([]string{"~/.config/git/*", "~/.ssh/**"}, nil, []string{"~/.ssh/id_*"}))
	c := NewCache()
	cacheCheck(t, c, in, "first call", false)
	cacheCheck(t, c, in, "second call", true)
	write(t, filepath.Join(f.home, ".config", "git", "attributes"), "", 0o644)
	p := cacheCheck(t, c, in, "a file matching the grant made", false)
	wantRule(t, p, PathRule{Path: filepath.Join(f.home, ".config", "git", "attributes"), Access: Read})
	cacheCheck(t, c, in, "a file matching the grant made, then again", true)
	write(t, filepath.Join(f.home, ".ssh", "id_rsa"), "k", 0o600)
	wantIn(t, "Deny", cacheCheck(t, c, in, "a key matching the deny made", false).Deny, filepath.Join(f.home, ".ssh", "id_rsa"))
	cacheCheck(t, c, in, "a key matching the deny made, then again", true)
	if err := os.Remove(filepath.Join(f.home, ".ssh", "id_ed25519")); err != nil {
		t.Fatal(err)
	}
	wantNotIn(t, "Deny", cacheCheck(t, c, in, "a key removed", false).Deny, filepath.Join(f.home, ".ssh", "id_ed25519"))
}
