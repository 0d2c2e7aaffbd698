package nsinit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"

	"golang.org/x/sys/unix"
)

// waitFreshInit waits (at most 10 s) until the pool has discarded at least one more init than
// before and has one ready again: an init started after the mount table last changed.
func waitFreshInit(t *testing.T, pool *Pool, before int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s := pool.Stats(); s.Discarded > before && s.Ready > 0 {
			return
		}
	}
	t.Fatalf("the pool did not renew its inits within 10s: %+v", pool.Stats())
}

// TestPoolSeesRemountReadOnly: a pooled init's mount namespace is a copy made when it started,
// and a bind remount on the host (mount -o remount,bind,ro DIR: an operator freezing a tree) changes
// the flags of the host's mount only, not its id. A call that takes an init started before the
// remount must not write where the host made the tree read-only, as an init started for the call
// (which copies the host's mounts as they are then) cannot.
func TestPoolSeesRemountReadOnly(t *testing.T) {
	pool := newTestPool(t)
	base := workTree(t, "/var/tmp")
	data := filepath.Join(base, "rw")
	// A mount of its own, made before the pool's inits (they are then renewed), so that the remount
	// below changes nothing but its flags.
	waitReady(t, pool)
	before := pool.Stats().Discarded
	if err := unix.Mount(data, data, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(data, unix.MNT_DETACH) })
	waitFreshInit(t, pool, before)
	if err := unix.Mount("", data, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "host"), nil, 0o644); err == nil {
		t.Fatal("the host could still write after the read-only remount")
	}
	p := sh(t, "echo written > "+filepath.Join(data, "pooled"))
	p.ReadWrite = append(p.ReadWrite, data)
	r := runPooled(t, pool, p)
	t.Logf("stats %+v", pool.Stats())
	if _, err := os.Stat(filepath.Join(data, "pooled")); err == nil || r.code == 0 {
		t.Errorf("exit %d: a pooled init started before `mount -o remount,bind,ro %s` wrote into it", r.code, data)
	}
	cold := sh(t, "echo written > "+filepath.Join(data, "cold"))
	cold.ReadWrite = append(cold.ReadWrite, data)
	cmd, stdout, stderr := capturing(t, cold)
	err := cmd.Run()
	cmd.CloseChildEnds()
	if c := finished(t, cmd, err, stdout, stderr); c.code == 0 {
		t.Errorf("exit 0: an init started for its call wrote into the read-only tree too (stderr %q)", c.stderr)
	}
}

// TestPoolOversizedPlanKeepsThePool: a plan the host refuses before any init sees it (larger than
// maxPlanSize once encoded: arguments within argv's limits grow up to six times in JSON, '<' is
// \u003c) is the call's fault, not the inits'. Take must refuse it without killing the ready inits
// one after another and counting each as an init that died waiting: three such calls (one, when
// the pool holds three inits) would otherwise stop the pool for a minute, so that any MCP client
// could keep it off.
func TestPoolOversizedPlanKeepsThePool(t *testing.T) {
	pool := newTestPool(t)
	waitReady(t, pool)
	big := plan(t, "/bin/true", []string{strings.Repeat("<", 100_000), strings.Repeat("<", 100_000)})
	before := pool.Stats()
	for i := range 3 {
		if !readyWithin(pool, 5*time.Second) {
			t.Fatalf("after %d oversized plans the pool has no init ready and starts none: it stopped for a minute (%+v)", i, pool.Stats())
		}
		// An error, or no init (the caller then starts one cold, which refuses the plan too).
		if cmd, _, err := pool.Take(big, false); cmd != nil {
			t.Fatalf("Take of a plan over %d bytes gave an init (%v)", maxPlanSize, err)
		}
	}
	after := pool.Stats()
	t.Logf("stats before %+v, after %+v", before, after)
	if after.Discarded > before.Discarded {
		t.Errorf("%d ready inits were killed for plans no init could take", after.Discarded-before.Discarded)
	}
	if !readyWithin(pool, 5*time.Second) {
		t.Fatalf("no init ready 5s after the oversized plans: the pool stopped starting inits (%+v)", pool.Stats())
	}
}

// readyWithin reports whether pool has an init ready within d.
func readyWithin(pool *Pool, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if pool.Stats().Ready > 0 {
			return true
		}
	}
	return false
}

// TestPoolSeesMountMoved: `mount --move` keeps the mount's id, so the ids of the host's mounts are
// the same before and after it, but the tree is elsewhere. A pooled init started before the move
// must not show the moved file system where it was (an operator moving a volume out of the
// workspace to take it from the agents), nor hide what is now at its new place.
func TestPoolSeesMountMoved(t *testing.T) {
	pool := newTestPool(t)
	base := workTree(t, "/var/tmp")
	a, b, vol := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "vol")
	fixture.WriteIn(t, base, map[string]string{"a/what": "dir a\n", "b/what": "dir b\n", "vol/what": "volume\n"})
	waitReady(t, pool)
	before := pool.Stats().Discarded
	// base, a private mount of its own (a move needs a parent that is not shared), with vol on a.
	if err := unix.Mount(base, base, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(base, unix.MNT_DETACH) })
	if err := unix.Mount("", base, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(vol, a, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	waitFreshInit(t, pool, before)
	if err := unix.Mount(a, b, "", unix.MS_MOVE, ""); err != nil {
		t.Fatal(err)
	}
	host, err := exec.Command("cat", filepath.Join(a, "what"), filepath.Join(b, "what")).Output()
	if err != nil || string(host) != "dir a\nvolume\n" {
		t.Fatalf("on the host after the move: %q, %v", host, err)
	}
	p := plan(t, "/bin/cat", []string{filepath.Join(a, "what"), filepath.Join(b, "what")})
	p.ReadOnly = append(p.ReadOnly, base)
	r := runPooled(t, pool, p)
	t.Logf("stats %+v", pool.Stats())
	if r.stdout != string(host) {
		t.Errorf("the pooled call read %q where the host reads %q: its init shows the mount where it was before `mount --move`", r.stdout, host)
	}
}
