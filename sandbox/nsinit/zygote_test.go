package nsinit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// newZygotePool is a pool whose zygote serves the calls it can, for one test, closed with it; it
// returns once the zygote has served a call (its threads are then ready for the next ones).
func newZygotePool(t *testing.T) *Pool {
	t.Helper()
	requireRoot(t)
	if err := Check(); err != nil {
		fixture.Missing(t, "the sandbox is unavailable: %v", err)
	}
	pool := NewPool(PoolConfig{Max: 1})
	t.Cleanup(pool.Close)
	for range 1000 {
		before := pool.Stats().Zygote
		if r := runPooled(t, pool, sh(t, "true")); r.code != 0 {
			t.Fatalf("a first call failed: %+v", r)
		}
		if pool.Stats().Zygote > before {
			return pool
		}
	}
	t.Fatalf("the zygote served no call: %+v", pool.Stats())
	return nil
}

// TestZygoteSeesMountsMadeAfterItPrepared: a ready thread's mount namespace is a copy of the host's
// made before its call. A file system mounted on the host after that must be what the call sees,
// not the directory underneath: the zygote compares the host's mount table with the one the
// thread copied.
func TestZygoteSeesMountsMadeAfterItPrepared(t *testing.T) {
	pool := newZygotePool(t)
	base := workTree(t, "/var/tmp")
	mnt := filepath.Join(base, "mnt")
	fixture.WriteIn(t, mnt, map[string]string{"which": "underneath\n"})
	runPooled(t, pool, sh(t, "true")) // the threads are ready after the tree was written
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(mnt, "which"), []byte("the new mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := plan(t, "/bin/cat", []string{filepath.Join(mnt, "which")})
	p.ReadOnly = append(p.ReadOnly, mnt)
	before := pool.Stats().Zygote
	r := runPooled(t, pool, p)
	if pool.Stats().Zygote <= before {
		t.Fatalf("the zygote did not serve the call: %+v", pool.Stats())
	}
	if r.code != 0 || r.stdout != "the new mount\n" {
		t.Fatalf("exit %d, stdout %q; want the file of the mount made after the zygote's threads were ready", r.code, r.stdout)
	}
}
