package nsinit

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/cgroup"
	"golang.org/x/sys/unix"
)

// TestZygoteSeesMountsMadeAfterItPrepared: a ready thread's mount namespace is a copy of the host's
// made before its call. A file system mounted on the host after that must be what the call sees,
// not the directory underneath: the zygote compares the host's mount table with the one the
// thread copied.
func TestZygoteSeesMountsMadeAfterItPrepared(t *testing.T) {
	pool := zygotePool(t)
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
	r := runPooled(t, pool, p)
	requireZygoteServed(t, pool, 2)
	if r.code != 0 || r.stdout != "the new mount\n" {
		t.Fatalf("exit %d, stdout %q; want the file of the mount made after the zygote's threads were ready", r.code, r.stdout)
	}
}

// hostTmpfs mounts a small tmpfs on the host, in a tree of the test's under /var/tmp (which the
// sandboxes show as it is), and returns its mountpoint; it is unmounted with the test, if it is
// still mounted.
func hostTmpfs(t *testing.T) string {
	t.Helper()
	mnt := filepath.Join(workTree(t, "/var/tmp"), "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	return mnt
}

// TestZygoteIdleThreadsLetGoOfUnmountedFileSystems: a ready thread's mount namespace is a copy of
// the host's, which keeps every file system the host had then. One the host unmounts while no call
// comes must not stay held by the waiting threads: each looks at the host's mount table when its
// wait for a call times out (zygoteIdle) and ends when it changed, and its replacement copies the
// table as it is now.
func TestZygoteIdleThreadsLetGoOfUnmountedFileSystems(t *testing.T) {
	mnt := hostTmpfs(t)
	pool := zygotePool(t)
	runPooled(t, pool, sh(t, "true")) // the threads are ready, with the tmpfs in their copies
	pid := zygotePID(t, pool)
	holders := func() []string { return threadsShowing(pid, mnt) }
	if len(holders()) == 0 {
		t.Fatal("no zygote thread holds the tmpfs before it is unmounted: the test sees nothing")
	}
	if err := unix.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3*zygoteIdle + 2*time.Second)
	for len(holders()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("zygote threads %v still hold the tmpfs the host unmounted", holders())
		}
		time.Sleep(50 * time.Millisecond)
	}
	requireZygoteServed(t, pool, 1)
}

// TestZygoteDeathEndsItsCalls: when the zygote dies (SIGKILL) during a call, the call's thread dies
// with it, and so do the call's PID 1 and program (their parent-death signal); the host sees the
// sandbox end without an end line, and nothing of it is left running.
func TestZygoteDeathEndsItsCalls(t *testing.T) {
	pool := zygotePool(t)
	token := sleepToken(t)
	p := sh(t, "sleep "+token+" & sleep "+token, "/usr/bin/sleep", "/bin/sleep")
	cmd, stdio := takeReady(t, pool, p, false)
	if !cmd.FromZygote() {
		t.Fatalf("the zygote did not build the sandbox: %+v", pool.Stats())
	}
	go func() { _, _ = io.Copy(io.Discard, stdio.Out) }()
	go func() { _, _ = io.Copy(io.Discard, stdio.Err) }()
	for deadline := time.Now().Add(10 * time.Second); len(sleepers(token)) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sleepers did not start: %v", sleepers(token))
		}
	}
	if err := unix.Kill(zygotePID(t, pool), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cmd.Ended():
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end after the zygote died")
	}
	if _, ok := cmd.Reported(); ok {
		t.Error("an end line from a zygote that was killed")
	}
	if err := cmd.Failure(); err == nil {
		t.Error("no failure reported for a sandbox whose zygote died")
	}
	_ = cmd.Process.Signal(unix.SIGKILL) // what the runner does: by pidfd, never by pid
	for deadline := time.Now().Add(5 * time.Second); len(sleepers(token)) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("processes of the call survive the zygote: %v", sleepers(token))
		}
	}
	cmd.Finish(func(err error) { t.Error(err) })
}

// TestPoolStartsOneZygote: calls taken while the pool's zygote is still starting (each wakes the
// refiller, which starts the zygote when there is none) do not start a second one, which the pool
// would never close.
func TestPoolStartsOneZygote(t *testing.T) {
	pool := newTestPool(t)
	for pool.Stats().Zygote == 0 {
		runPooled(t, pool, sh(t, "true"))
	}
	time.Sleep(100 * time.Millisecond) // a second zygote started meanwhile would be up by now
	var zygotes []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && strings.HasPrefix(cmdline(pid), procName+" "+zygoteMarker) && ppidOf(pid) == os.Getpid() {
			zygotes = append(zygotes, pid)
		}
	}
	if len(zygotes) != 1 {
		t.Fatalf("the pool started %d zygotes: %v", len(zygotes), zygotes)
	}
}

// ppidOf returns pid's parent, 0 when it is gone.
func ppidOf(pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// TestZygoteSlotsCarryTheLastLimits: the control groups the pool makes ahead of the zygote's calls
// carry the limits of the last call (most calls have the daemon's defaults, which then are not
// written on the call's path), and a call with other limits never runs in a group made with those:
// its memory limit is its own (here none), not the last call's.
func TestZygoteSlotsCarryTheLastLimits(t *testing.T) {
	pool := zygotePool(t)
	if cgroup.Default().Mechanism(cgroup.Memory) == cgroup.None {
		fixture.Missing(t, "no memory controller for the call's groups")
	}
	first := sh(t, "true")
	first.Limits = isolation.Limits{MemoryBytes: 256 << 20, Pids: 128}
	want := groupLimits(first.Limits)
	for range 3 {
		if r := runPooled(t, pool, first); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		pool.mu.Lock()
		ready := len(pool.slots) == zygoteSlots
		for _, g := range pool.slots {
			got, ok := g.Applied()
			ready = ready && ok && got == want
		}
		pool.mu.Unlock()
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool's slots do not carry the last call's limits %+v", want)
		}
	}
	second := sh(t, "true")
	second.Limits = isolation.Limits{Pids: 64}
	cmd, stdio := takeReady(t, pool, second, false)
	if !cmd.FromZygote() {
		t.Fatalf("the zygote did not build the sandbox: %+v", pool.Stats())
	}
	got, ok := cmd.group.Applied()
	mem := groupMemoryLimit(t, cmd.group)
	if r := finishPooled(t, cmd, stdio); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !ok || got != groupLimits(second.Limits) || mem >= 0 {
		t.Fatalf("the call with limits %+v ran in a group with %+v (%t), memory limit %d; want its own and no memory limit",
			second.Limits, got, ok, mem)
	}
}

// groupMemoryLimit reads the memory limit set in g's groups: -1 when there is none.
func groupMemoryLimit(t *testing.T, g *cgroup.Group) int64 {
	t.Helper()
	read := func(path string) int64 {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.TrimSpace(string(data))
		n, err := strconv.ParseInt(s, 10, 64)
		if s == "max" || err == nil && n >= 1<<62 {
			return -1
		}
		if err != nil {
			t.Fatalf("%s: %q", path, s)
		}
		return n
	}
	if d := g.V2Dir(); d != "" && cgroup.Default().Mechanism(cgroup.Memory) == cgroup.V2 {
		return read(filepath.Join(d, "memory.max"))
	}
	for _, f := range g.TasksFiles() {
		if dir := filepath.Dir(f); strings.Contains(dir, "/memory/") {
			return read(filepath.Join(dir, "memory.limit_in_bytes"))
		}
	}
	return -1
}

// TestSlotWakesTheRefillerWhenNoneIsReady: a call that finds no control group made ahead (two
// calls came before the refiller made the next) wakes the refiller; if it did not, the pool would
// stay without slots until its once-a-second sweep, and every call until then would make its
// groups on its path.
func TestSlotWakesTheRefillerWhenNoneIsReady(t *testing.T) {
	p := &Pool{wake: make(chan struct{}, 1)}
	if g, _ := p.slot(keptKey{limits: cgroup.Limits{Pids: 64}}); g != nil {
		t.Fatalf("an empty pool gave a slot %s", g.Name())
	}
	select {
	case <-p.wake:
	default:
		t.Fatal("taking from an empty pool's slots did not wake the refiller")
	}
	if p.slotLimits == nil || p.slotLimits.Pids != 64 {
		t.Fatalf("the next slots are not made with the call's limits: %+v", p.slotLimits)
	}
}

// TestExhaustedOnlyForAFailedProgram: a program whose fork was refused by its pids limit is told
// so when it fails, and not when it handled the refusal and exited 0 (its groups' counters are
// not read for it).
func TestExhaustedOnlyForAFailedProgram(t *testing.T) {
	pool := zygotePool(t)
	if cgroup.Default().Mechanism(cgroup.Pids) == cgroup.None {
		fixture.Missing(t, "no pids controller for the call's groups")
	}
	for _, c := range []struct {
		exit int
		want string
	}{
		{0, ""},
		{3, "process limit 8 reached (the CLI could not start another process or thread)"},
	} {
		// The inner shell's forks beyond the limit fail (it dies of it); the outer one exits as told.
		p := sh(t, fmt.Sprintf(`sh -c 'n=0; while [ $n -lt 20 ]; do sleep 5 & n=$((n+1)); done' 2>/dev/null; exit %d`, c.exit), "/bin/sleep")
		p.Limits = isolation.Limits{Pids: 8}
		cmd, stdio := takeReady(t, pool, p, false)
		go io.Copy(io.Discard, stdio.Out)
		go io.Copy(io.Discard, stdio.Err)
		<-cmd.Ended()
		status, ok := cmd.Reported()
		if !ok || status != c.exit {
			t.Fatalf("status %d (reported %t), want %d; failure %v", status, ok, c.exit, cmd.Failure())
		}
		if err := cmd.Failure(); err != nil {
			t.Fatal(err)
		}
		if got := cmd.Exhausted(false); got != c.want {
			t.Errorf("exit %d: Exhausted() = %q, want %q", c.exit, got, c.want)
		}
		cmd.Finish(func(err error) { t.Error(err) })
	}
	requireZygoteServed(t, pool, 2)
}
