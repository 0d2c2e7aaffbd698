package nsinit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

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
// maxPlanSize once encoded: here eleven arguments each within an argument's limit, 128 KiB) is the
// call's fault, not the inits'. Take must refuse it without killing the ready inits
// one after another and counting each as an init that died waiting: three such calls (one, when
// the pool holds three inits) would otherwise stop the pool for a minute, so that any MCP client
// could keep it off.
func TestPoolOversizedPlanKeepsThePool(t *testing.T) {
	pool := newTestPool(t)
	waitReady(t, pool)
	args := make([]string, 11)
	for i := range args {
		args[i] = strings.Repeat("<", 100_000)
	}
	big := plan(t, "/bin/true", args)
	before := pool.Stats()
	for i := range 3 {
		if !readyWithin(pool, 5*time.Second) {
			t.Fatalf("after %d oversized plans the pool has no init ready and starts none: it stopped for a minute (%+v)", i, pool.Stats())
		}
		// An error, or no init (the caller then starts one cold, which refuses the plan too).
		if cmd, _, err := pool.Take(big, false, nil); cmd != nil {
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

// TestPoolForgetsTransientMounts: the pool compares the host's mount table with the one it saw at
// its previous look (each Take, and once a second), not with the one each init copied. A mount
// made and removed between two looks, while an init was started, is in that init's copy but
// never seen as a change: the init keeps the file system (a snapshot, a decrypted volume mounted
// for a moment) alive after the host unmounted it, for as long as it waits, and shows it to its
// call.
func TestPoolForgetsTransientMounts(t *testing.T) {
	pool := newTestPool(t)
	base := workTree(t, "/var/tmp")
	m := filepath.Join(base, "ro", "m")
	fixture.WriteIn(t, m, map[string]string{"what": "underneath\n"})
	waitReady(t, pool)
	pool.mu.Lock()
	pool.target = 2 // one more init, started while the mount below is there
	pool.mu.Unlock()
	if err := unix.Mount("tmpfs", m, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m, "what"), []byte("transient\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pool.kick()
	for deadline := time.Now().Add(5 * time.Second); pool.Stats().Ready < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no second init within 5s: %+v", pool.Stats())
		}
	}
	if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	p := plan(t, "/bin/cat", []string{filepath.Join(m, "what")})
	p.ReadOnly = append(p.ReadOnly, filepath.Join(base, "ro"))
	for range 2 {
		r := runPooled(t, pool, p)
		if r.stdout != "underneath\n" {
			t.Errorf("a pooled call read %q at %s, unmounted on the host before the call (stats %+v)", r.stdout, m, pool.Stats())
		}
	}
}

// TestPoolFailuresCountOnlyInARow: the pool stops starting inits for a minute after three inits
// died waiting "in a row" (PoolConfig, docs/operations.md), but nothing resets the count when an
// init serves its call: three deaths spread over a daemon's life (an OOM kill, an operator's kill,
// a sweep) stop the pool as a broken host would.
func TestPoolFailuresCountOnlyInARow(t *testing.T) {
	pool := newInitPool(t)
	p := plan(t, "/bin/true", nil)
	for i := range 3 {
		if !readyWithin(pool, 5*time.Second) {
			t.Fatalf("after %d inits died, each followed by a call served by a pooled init, the pool starts none (%+v)", i, pool.Stats())
		}
		pool.mu.Lock()
		victim := pool.idle[0].cmd.Process.Pid
		pool.mu.Unlock()
		if err := unix.Kill(victim, unix.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// The sweep (once a second) finds it dead and counts it.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			pool.mu.Lock()
			found := false
			for _, w := range pool.idle {
				found = found || w.cmd.Process.Pid == victim
			}
			pool.mu.Unlock()
			if !found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the dead init is still in the pool after 5s")
			}
		}
		if !readyWithin(pool, 5*time.Second) {
			t.Fatalf("after %d inits died, each followed by a call served by a pooled init, the pool starts none (%+v)", i+1, pool.Stats())
		}
		if r := runPooled(t, pool, p); r.code != 0 || r.failure != nil {
			t.Fatalf("exit %d, failure %v", r.code, r.failure)
		}
	}
	if !readyWithin(pool, 5*time.Second) {
		t.Errorf("three inits died waiting, none right after another (each was followed by a call a pooled init served), and the pool stopped for a minute: %+v", pool.Stats())
	}
}

// listmountEnv, set to 1, makes TestPoolWhenListmountIsRefused run its checks in this process,
// with listmount(2) refused (EPERM) by a seccomp filter.
const listmountEnv = "NSINIT_TEST_LISTMOUNT_EPERM"

// TestPoolWhenListmountIsRefused: a host whose seccomp profile does not know listmount (a container
// runtime's default profile older than the syscall answers EPERM) makes every look at the mount
// table "a change" (mountTable.changed: a table that cannot be read counts as changed, and only
// ENOSYS falls back to /proc/self/mountinfo). The pool then kills every ready init at each Take and
// once a second, and starts them again: it spins, starting its Max inits a second for as long as
// the daemon runs, and no call is ever served by one.
func TestPoolWhenListmountIsRefused(t *testing.T) {
	if os.Getenv(listmountEnv) != "1" {
		requireRoot(t)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^TestPoolWhenListmountIsRefused$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), listmountEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("with listmount refused: %v\n%s", err, out)
		}
		return
	}
	const listmountNr = 458 // the same on amd64 and arm64 (a new-style syscall number)
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: listmountNr},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		t.Fatalf("seccomp: %v", errno)
	}
	if _, _, errno := unix.Syscall6(listmountNr, 0, 0, 0, 0, 0, 0); errno != unix.EPERM {
		t.Fatalf("listmount answers %v, want EPERM from the filter", errno)
	}
	pool := newTestPool(t)
	waitReady(t, pool)
	time.Sleep(3 * time.Second)
	s := pool.Stats()
	t.Logf("after 3s: %+v", s)
	if s.Started > 4 {
		t.Errorf("the pool started %d inits in 3s without a single call: it discards and restarts them every second", s.Started)
	}
	cmd, stdio := takeReady(t, pool, plan(t, "/bin/true", nil), false)
	finishPooled(t, cmd, stdio)
	if s := pool.Stats(); s.Misses > 0 {
		t.Errorf("a call with an init ready found none (%+v): each Take discards every ready init", s)
	}
}

// TestPoolTakesTheHostsRlimits: an init started for its call inherits the host's resource limits
// as they are then (those the plan does not set: the stack, locked memory, address space...); a
// pooled init has those of the host when it started. Like the umask (envelope.HostUmask), a
// limit the host lowered since (prlimit --pid on the daemon) must bind the call.
func TestPoolTakesTheHostsRlimits(t *testing.T) {
	pool := newTestPool(t)
	waitReady(t, pool)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	lower := unix.Rlimit{Cur: 64 << 10, Max: old.Max}
	if lower.Cur >= old.Cur {
		t.Skipf("RLIMIT_MEMLOCK is %d already", old.Cur)
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lower); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old) })
	p := sh(t, "ulimit -l")
	r := runPooled(t, pool, p)
	cmd, stdout, stderr := capturing(t, p)
	err := cmd.Run()
	cmd.CloseChildEnds()
	cold := finished(t, cmd, err, stdout, stderr)
	if r.stdout != cold.stdout {
		t.Errorf("ulimit -l: %q in a pooled init started before the host lowered it, %q in one started for its call", r.stdout, cold.stdout)
	}
}
