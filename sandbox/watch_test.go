package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	fx "github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"golang.org/x/sys/unix"
)

// watchedCheck is cacheCheck that also fails when c's watcher spared the call its lstat and
// readlink questions.
func watchedCheck(t *testing.T, c *Cache, in Input, step string, reuse bool) {
	t.Helper()
	before := c.Watched()
	cacheCheck(t, c, in, step, reuse)
	if c.Watched() > before {
		t.Errorf("%s: spared the policy's lstat and readlink questions", step)
	}
}

// awaitSpared is cacheCheck, with the kept policy reused, until c's watcher spares a call the
// policy's lstat and readlink questions: a folder the policy's paths pass through (the temporary
// folder) may see events of other tests (each makes the next call a full check, which is safe),
// so a few calls may be needed.
func awaitSpared(t *testing.T, c *Cache, in Input, step string) {
	t.Helper()
	for range 50 {
		before := c.Watched()
		cacheCheck(t, c, in, step, true)
		if c.Watched() > before {
			return
		}
	}
	t.Errorf("%s: no call of 50 was spared the policy's lstat and readlink questions", step)
}

// TestCacheWatchedSparesOnlyWhileNothingChanged: once a kept policy's answers were checked in
// full, later calls skip its lstat and readlink questions; each change below alters only such
// answers (a mode, an owner, a link count, a link's target, a folder above replaced, a mount over
// a granted file), and the next call must then compile afresh, and check the new policy in full
// once before it skips again.
func TestCacheWatchedSparesOnlyWhileNothingChanged(t *testing.T) {
	f := newFixture(t)
	var fs unix.Statfs_t
	if err := unix.Statfs(f.ws, &fs); err != nil || !watchableFS[int64(fs.Type)] {
		fx.Missing(t, "the test's folders are on a file system the watcher does not trust (%#x)", fs.Type)
	}
	tools, elsewhere := realTemp(t), realTemp(t) // made before any policy: /tmp is watched
	script := filepath.Join(tools, "tool")
	write(t, script, "#!/usr/bin/sh\n", 0o755)
	write(t, filepath.Join(tools, "helper"), "#!/usr/bin/sh\n", 0o755)
	write(t, filepath.Join(f.ws, "keys.pem"), "key", 0o600)
	write(t, filepath.Join(f.ws, "conf", "app.toml"), "a", 0o644)
	write(t, filepath.Join(f.ws, "other.toml"), "b", 0o644)
	symlink(t, "conf/app.toml", filepath.Join(f.ws, "current.toml"))
	allow := true
	sb := manifest.Sandbox{
		FS: &manifest.FS{Read: []string{"./conf/app.toml", "./current.toml"}, Write: []string{"./out"},
			Deny: []string{"./keys.pem"}},
		Exec: &manifest.Exec{Allow: &allow, Spawn: []string{"helper"}},
	}
	in := f.input(sb)
	in.Binary, in.PATH = script, tools
	c := NewCache()
	settle := func(step string) {
		t.Helper()
		watchedCheck(t, c, in, step+": compiled", false)
		watchedCheck(t, c, in, step+": checked in full", true)
		awaitSpared(t, c, in, step+": spared")
	}
	settle("first")
	changes := []struct {
		name   string
		change func()
		root   bool
	}{
		{"the helper loses its exec bits", func() { must(t, os.Chmod(filepath.Join(tools, "helper"), 0o644)) }, false},
		{"a hard link to the denied keys.pem, from a folder of no answer's", func() {
			must(t, os.Link(filepath.Join(f.ws, "keys.pem"), filepath.Join(elsewhere, "k")))
		}, false},
		{"current.toml points elsewhere", func() {
			must(t, os.Remove(filepath.Join(f.ws, "current.toml")))
			symlink(t, "other.toml", filepath.Join(f.ws, "current.toml"))
		}, false},
		{"conf replaced by a copy", func() {
			must(t, os.Rename(filepath.Join(f.ws, "conf"), filepath.Join(f.ws, "conf.old")))
			write(t, filepath.Join(f.ws, "conf", "app.toml"), "a", 0o644)
		}, false},
		{"the denied keys.pem given to nobody", func() { must(t, os.Chown(filepath.Join(f.ws, "keys.pem"), 65534, 65534)) }, true},
		{"a file mounted over the granted app.toml", func() {
			t.Cleanup(bindMount(t, filepath.Join(f.ws, "other.toml"), filepath.Join(f.ws, "conf", "app.toml")))
		}, true},
	}
	for _, ch := range changes {
		if ch.root && os.Geteuid() != 0 {
			continue
		}
		ch.change()
		settle(ch.name)
	}
	// What none of its answers depends on: a file made in the workspace (its folder is watched).
	write(t, filepath.Join(f.ws, "new.txt"), "new", 0o644)
	watchedCheck(t, c, in, "a new file in the workspace", true)
	awaitSpared(t, c, in, "then again")
}

// TestWatcherTrustsLocalFileSystemsOnly: a journal that asked about a path on procfs (which
// inotify does not follow) or about a relative path is not watched: its policy is always checked
// in full.
func TestWatcherTrustsLocalFileSystemsOnly(t *testing.T) {
	w := newWatcher()
	if w.fd < 0 {
		fx.Missing(t, "no inotify")
	}
	t.Cleanup(func() { unix.Close(w.fd) })
	for _, name := range []string{"/proc/self/status", "relative/path", "/usr/../etc"} {
		j := &journal{questions: []question{{kind: askLstat, name: name}}}
		if k := w.paths(j); k.ok && w.take(&k, 0, nil) {
			t.Errorf("a journal that asked about %q is watched", name)
		}
	}
	j := &journal{questions: []question{{kind: askLstat, name: realTemp(t)}}}
	if k := w.paths(j); !k.ok || !w.take(&k, 0, nil) {
		t.Skip("the temporary folder is not on a file system the watcher trusts")
	}
}

// TestCacheWatchesTakenAtEveryFullCheck: the denied keys.pem is swapped for another file just
// before a full check takes its watches and back just after, so that check's watch is on the
// other file while its answers are keys.pem's; the swaps are events of the workspace's folder, so
// the next call checks in full again and must take the watches again, on keys.pem. A hard link
// to keys.pem made after that (an event of keys.pem's own watch only) must then be seen.
func TestCacheWatchesTakenAtEveryFullCheck(t *testing.T) {
	f := newFixture(t)
	var fs unix.Statfs_t
	if err := unix.Statfs(f.ws, &fs); err != nil || !watchableFS[int64(fs.Type)] {
		fx.Missing(t, "the test's folders are on a file system the watcher does not trust (%#x)", fs.Type)
	}
	keep, elsewhere := realTemp(t), realTemp(t)
	keys := filepath.Join(f.ws, "keys.pem")
	write(t, keys, "key", 0o600)
	write(t, filepath.Join(keep, "decoy"), "decoy", 0o600)
	in := f.input(manifest.Sandbox{FS: &manifest.FS{Read: []string{"./**"}, Deny: []string{"./keys.pem"}}})
	c := NewCache()
	watchedCheck(t, c, in, "compiled", false)
	swaps := 0
	takeHook = func(after bool) {
		if swaps >= 2 {
			return
		}
		swaps++
		if !after { // keys.pem aside, the decoy in its place
			must(t, os.Rename(keys, filepath.Join(keep, "keys.pem")))
			must(t, os.Rename(filepath.Join(keep, "decoy"), keys))
		} else { // and back
			must(t, os.Rename(keys, filepath.Join(keep, "decoy")))
			must(t, os.Rename(filepath.Join(keep, "keys.pem"), keys))
		}
	}
	t.Cleanup(func() { takeHook = nil })
	watchedCheck(t, c, in, "checked in full, keys.pem swapped around the watches", true)
	if swaps != 2 {
		t.Fatalf("the hook ran %d times, want 2", swaps)
	}
	awaitSpared(t, c, in, "spared once checked in full again")
	must(t, os.Link(keys, filepath.Join(elsewhere, "k")))
	watchedCheck(t, c, in, "a hard link to keys.pem", false)
}

// TestCacheWatchedAfterAQueueOverflow: the watcher's queue fills with events of another policy's
// folder (more than fs.inotify.max_queued_events, so the kernel drops the rest and queues an
// overflow), then a granted file of this policy loses its exec bits, an event the kernel drops:
// only the overflow says that anything changed, and the next call must check in full and compile
// afresh.
func TestCacheWatchedAfterAQueueOverflow(t *testing.T) {
	max, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		fx.Missing(t, "no inotify limits: %v", err)
	}
	var limit int
	if _, err := fmt.Sscan(string(max), &limit); err != nil || limit > 1<<20 {
		t.Skipf("fs.inotify.max_queued_events %q: too many events to fill", max)
	}
	f, other := newFixture(t), newFixture(t)
	var fs unix.Statfs_t
	if err := unix.Statfs(f.ws, &fs); err != nil || !watchableFS[int64(fs.Type)] {
		fx.Missing(t, "the test's folders are on a file system the watcher does not trust (%#x)", fs.Type)
	}
	tools := realTemp(t)
	script := filepath.Join(tools, "tool")
	write(t, script, "#!/usr/bin/sh\n", 0o755)
	write(t, filepath.Join(tools, "helper"), "#!/usr/bin/sh\n", 0o755)
	allow := true
	in := f.input(manifest.Sandbox{Exec: &manifest.Exec{Allow: &allow, Spawn: []string{"helper"}}})
	in.Binary, in.PATH = script, tools
	noise := other.input(manifest.Sandbox{FS: &manifest.FS{Read: []string{"./**"}}})
	c := NewCache()
	for _, x := range []Input{in, noise} {
		watchedCheck(t, c, x, "compiled", false)
		watchedCheck(t, c, x, "checked in full", true)
	}
	awaitSpared(t, c, in, "spared")
	for i := range limit + 64 { // the other policy's workspace, watched: each file an event
		fd, err := unix.Open(filepath.Join(other.ws, fmt.Sprint(i)), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
	}
	must(t, os.Chmod(filepath.Join(tools, "helper"), 0o644))
	watchedCheck(t, c, in, "the helper lost its exec bits after the queue overflowed", false)
}
