package nsinit

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestZygoteDeathEndsItsCalls: when the zygote dies (SIGKILL) during a call, the call's thread dies
// with it, and so do the call's PID 1 and program (their parent-death signal); the host sees the
// sandbox end without an end line, and nothing of it is left running.
func TestZygoteDeathEndsItsCalls(t *testing.T) {
	pool := newZygotePool(t)
	token := fmt.Sprintf("%d.%d", os.Getpid(), time.Now().UnixNano()%1e6)
	p := sh(t, "sleep 1"+token+" & sleep 2"+token, "/usr/bin/sleep", "/bin/sleep")
	cmd, stdio := takeReady(t, pool, p, false)
	if !cmd.FromZygote() {
		t.Fatalf("the zygote did not build the sandbox: %+v", pool.Stats())
	}
	go func() { _, _ = io.Copy(io.Discard, stdio.Out) }()
	go func() { _, _ = io.Copy(io.Discard, stdio.Err) }()
	for deadline := time.Now().Add(10 * time.Second); len(pgrep(t, token)) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sleepers did not start: %v", pgrep(t, token))
		}
	}
	pool.mu.Lock()
	z := pool.zyg
	pool.mu.Unlock()
	if err := z.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cmd.Ended():
	case <-time.After(10 * time.Second):
		out, _ := exec.Command("sh", "-c", "ps -eo pid,ppid,stat,cmd | grep -E 'clihost|"+token+"' | grep -v grep; ls -l /proc/*/fd 2>/dev/null | grep -c pipe").CombinedOutput()
		t.Fatalf("the call did not end after the zygote %d died (pid 1 %d):\n%s", z.cmd.Process.Pid, cmd.Process.Pid, out)
	}
	if _, ok := cmd.Reported(); ok {
		t.Error("an end line from a zygote that was killed")
	}
	if err := cmd.Failure(); err == nil {
		t.Error("no failure reported for a sandbox whose zygote died")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL) // what the runner does: by pidfd, never by pid
	for deadline := time.Now().Add(5 * time.Second); len(pgrep(t, token)) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("processes of the call survive the zygote: %v", pgrep(t, token))
		}
	}
	cmd.Finish(func(err error) { t.Error(err) })
}

// pgrep returns the pids of the processes whose command line contains s.
func pgrep(t *testing.T, s string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(data), s) {
			out = append(out, pid)
		}
	}
	return out
}
