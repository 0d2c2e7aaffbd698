package nsinit

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
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
