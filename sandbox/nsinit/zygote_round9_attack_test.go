package nsinit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/cgroup"
	"golang.org/x/sys/unix"
)

// Round 9's attacks: a ready zygote thread empties its bounding set while it waits (prepare), the
// masks' detached tmpfs is closed on another thread after the call's thread built the sandbox, and
// the pipe ends sent to the zygote are raw descriptors.

// capsProbe prints the program's capability sets, those of a program it execs, its descriptors
// (with their targets) and what it reaches of its denied paths under ws.
func capsProbe(ws string) string {
	return `grep '^Cap' /proc/self/status | sed 's/^/self /'
/bin/sh -c "grep '^Cap' /proc/self/status" | sed 's/^/child /'
/bin/sh -c 'ls -l /proc/$PPID/fd >/tmp/fds'; sed -n 's/.* \([0-9][0-9]*\) -> /fd \1 /p' /tmp/fds
cat ` + ws + `/secret/key ` + ws + `/.env 2>/dev/null | sed 's/^/ESCAPE-read /'
ls -A ` + ws + `/.ssh 2>/dev/null | sed 's/^/ESCAPE-ssh /' 
echo done`
}

// capsWorkspace is a writable tree with denied paths in it (a directory and a file), and the plan
// that probes it.
func capsWorkspace(t *testing.T) (string, isolation.Plan) {
	t.Helper()
	ws := filepath.Join(workTree(t, "/var/tmp"), "rw")
	for _, f := range []string{"secret/key", ".ssh/id_ed25519", ".env"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, f), []byte("SECRET\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	giveToNobody(t, ws)
	p := sh(t, capsProbe(ws), "/bin/grep", "/bin/sed", "/bin/ls", "/bin/cat", "/bin/readlink")
	p.ReadWrite = []string{ws}
	p.Deny = []string{filepath.Join(ws, "secret"), filepath.Join(ws, ".ssh"), filepath.Join(ws, ".env")}
	return ws, p
}

// checkCapsProbe fails t for anything capsProbe saw that it must not.
func checkCapsProbe(t *testing.T, i int, r result) {
	t.Helper()
	if !strings.Contains(r.stdout, "\ndone\n") && !strings.HasSuffix(r.stdout, "done\n") {
		t.Errorf("call %d did not finish: exit %d, stdout %q, stderr %q, failure %v", i, r.code, r.stdout, r.stderr, r.failure)
		return
	}
	var caps, fds int
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && (f[0] == "self" || f[0] == "child") && strings.HasPrefix(f[1], "Cap"):
			caps++
			if f[2] != noCapabilities {
				t.Errorf("call %d: %s %s %s", i, f[0], f[1], f[2])
			}
		case len(f) >= 2 && f[0] == "fd":
			fds++
			if f[1] != "0" && f[1] != "1" && f[1] != "2" {
				t.Errorf("call %d: the program holds descriptor %s", i, strings.Join(f[1:], " "))
			}
		case strings.Contains(line, "ESCAPE"):
			t.Errorf("call %d: %s", i, line)
		}
	}
	if fds != 3 {
		t.Errorf("call %d: %d descriptors listed, want 0, 1 and 2: %q", i, fds, r.stdout)
	}
	if caps != 10 {
		t.Errorf("call %d: %d capability lines, want 10: %q", i, caps, r.stdout)
	}
}

// TestZygoteCapsFdsMasksUnderConcurrency runs rounds of many calls at once, each with masks, and
// checks in every program and in a program it execs: no capability in any set (CapBnd included:
// the call's thread now relies on the bounding set it emptied when it was made ready), no
// descriptor but 0, 1 and 2 (the masks' detached tmpfs is closed on another thread, racing the
// other calls' clones), and the denied paths masked.
func TestZygoteCapsFdsMasksUnderConcurrency(t *testing.T) {
	pool := zygotePool(t)
	_, p := capsWorkspace(t)
	const rounds, calls = 3, 12
	for round := range rounds {
		var wg sync.WaitGroup
		results := make([]result, calls)
		for i := range calls {
			wg.Go(func() { results[i] = runPooled(t, pool, p) })
		}
		wg.Wait()
		for i, r := range results {
			checkCapsProbe(t, round*calls+i, r)
		}
	}
	requireZygoteServed(t, pool, rounds*calls)
}

// TestZygoteFreshThreadHasNoCapabilities: a call that arrives when the ready threads' copies of
// the mount table are stale is served on a thread made for it (fresh); its program has no
// capability either, in any set, and its masks are in force. The host's mount table changes
// before every round.
func TestZygoteFreshThreadHasNoCapabilities(t *testing.T) {
	fixture.NeedRoot(t) // mounts on the host
	pool := zygotePool(t)
	_, p := capsWorkspace(t)
	runPooled(t, pool, plan(t, "/bin/true", nil))
	mnt := filepath.Join(workTree(t, "/var/tmp"), "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) }) // a round that failed left it
	// The probe also says whether the call's mount table has the host's new mount: the ready
	// threads' copies (made before it) do not, so a call that sees it was served on a thread
	// made after it (fresh).
	p.Args[len(p.Args)-1] = "grep -q ' " + mnt + " ' /proc/self/mountinfo && echo sees-new-mount\n" + p.Args[len(p.Args)-1]
	fresh := 0
	for round := range 6 {
		time.Sleep(100 * time.Millisecond) // the replacement threads are ready
		if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%dk", 64+round)); err != nil {
			t.Fatal(err)
		}
		if round%2 == 1 {
			_ = unix.Unmount(mnt, unix.MNT_DETACH)
		}
		var wg sync.WaitGroup
		results := make([]result, 4)
		for i := range results {
			wg.Go(func() { results[i] = runPooled(t, pool, p) })
		}
		wg.Wait()
		for i, r := range results {
			checkCapsProbe(t, round*10+i, r)
			if round%2 == 0 && strings.Contains(r.stdout, "sees-new-mount") {
				fresh++
			}
		}
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
	}
	t.Logf("%d of 12 calls saw the new mount", fresh)
	if fresh == 0 {
		t.Error("no call saw the host's new mount: none was served on a fresh thread")
	}
}

// TestZygoteManyCallsLeakNoDescriptor runs 200 calls through the zygote, some at once: plain ones,
// ones with masks (whose detached tmpfs is now closed on another thread), ones whose program does
// not exist, and ones killed at their deadline. Afterwards the zygote and this process (the host)
// hold no more descriptors than before, and the zygote no more children, once the sandbox it may
// have built ahead for the next call is let go.
func TestZygoteManyCallsLeakNoDescriptor(t *testing.T) {
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	_, masked := capsWorkspace(t)
	missing := plan(t, "/bin/true", nil)
	missing.Path = "/usr/bin/clihost-no-such-program"
	slow := sh(t, "sleep 5", "/bin/sleep")
	slow.Timeout = 200 * time.Millisecond
	plans := []isolation.Plan{plan(t, "/bin/true", nil), masked, missing, slow}
	for _, p := range plans { // the pool settles (it starts its inits after the first takes)
		if cmd, stdio, err := pool.Take(p, false, nil); err == nil && cmd != nil {
			finishPooled(t, cmd, stdio)
		}
	}
	time.Sleep(time.Second)
	hostList := func() []string {
		entries, _ := os.ReadDir("/proc/self/fd")
		var out []string
		for _, e := range entries {
			target, _ := os.Readlink("/proc/self/fd/" + e.Name())
			out = append(out, e.Name()+"->"+target)
		}
		return out
	}
	hostFDs := func() int { return len(hostList()) }
	fdsBefore, kidsBefore := zygoteBaseline(t, zpid)
	hostBefore := hostFDs()
	t.Logf("host before: %v", hostList())
	const calls, atOnce = 200, 8
	var wg sync.WaitGroup
	sem := make(chan struct{}, atOnce)
	var mu sync.Mutex
	bad := 0
	for i := range calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cmd, stdio, err := pool.Take(plans[i%len(plans)], false, nil)
			if i%len(plans) == 2 && err != nil {
				return // the program does not exist: refused before the zygote
			}
			if err != nil || cmd == nil {
				mu.Lock()
				bad++
				mu.Unlock()
				return
			}
			r := finishPooled(t, cmd, stdio)
			if i%len(plans) == 1 && !strings.Contains(r.stdout, "done") {
				t.Errorf("call %d (masked) did not run: %+v", i, r)
			}
		})
	}
	wg.Wait()
	if bad > 0 {
		t.Errorf("%d calls could not be taken", bad)
	}
	requireZygoteServed(t, pool, calls/2)
	// A sandbox built ahead for the next call is no leak: it holds its socket, its mount table,
	// its PID 1 and the host's end until it is used or let go, as here.
	time.Sleep(5 * aheadPause)
	pool.zygote().closeAhead()
	var fds, kids []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if fds, kids = zygoteSteady(t, zpid); len(fds) <= len(fdsBefore) && len(kids) <= len(kidsBefore) && hostFDs() <= hostBefore {
			return
		}
	}
	t.Fatalf("after %d calls the zygote holds %d descriptors %v and children %v (before %d, %v); the host %d descriptors %v (before %d; stats %+v)",
		calls, len(fds), fds, kids, len(fdsBefore), kidsBefore, hostFDs(), hostList(), hostBefore, pool.Stats())
}

// TestZygoteInterleavedLimitsHold runs calls with different control group limits interleaved and
// at once (the pool now refills its slots after every take): a fork bomb under a pids limit stops
// at it, a memory hog under a memory limit is stopped, and a call without limits is not held to
// another call's.
func TestZygoteInterleavedLimitsHold(t *testing.T) {
	pool := zygotePool(t)
	if cgroup.Default().Mechanism(cgroup.Pids) == cgroup.None || cgroup.Default().Mechanism(cgroup.Memory) == cgroup.None {
		fixture.Missing(t, "no pids or memory controller for the call's groups")
	}
	bomb := sh(t, `n=0; while [ $n -lt 200 ]; do sleep 2 & n=$((n+1)); echo $n; done`, "/bin/sleep")
	bomb.Limits = isolation.Limits{Pids: 24}
	hog := sh(t, `head -c 400000000 /dev/zero | tail -c 400000000 | wc -c`, "/usr/bin/head", "/usr/bin/tail", "/usr/bin/wc")
	hog.Limits = isolation.Limits{MemoryBytes: 64 << 20}
	free := sh(t, `n=0; while [ $n -lt 60 ]; do sleep 1 & n=$((n+1)); done; echo $n; head -c 100000000 /dev/zero | tail -c 100000000 | wc -c`, "/bin/sleep", "/usr/bin/head", "/usr/bin/tail", "/usr/bin/wc")
	free.Limits = isolation.Limits{Pids: 1000, MemoryBytes: 1 << 30}
	last := func(out string) string {
		f := strings.Fields(out)
		if len(f) == 0 {
			return ""
		}
		return f[len(f)-1]
	}
	check := func(i int, kind int, r result) {
		switch kind {
		case 0:
			n := 0
			fmt.Sscan(last(r.stdout), &n)
			if n >= 24 {
				t.Errorf("call %d: the fork bomb under pids 24 started %d processes (exit %d, stderr %q)", i, n, r.code, r.stderr)
			}
		case 1:
			if strings.TrimSpace(r.stdout) == "400000000" {
				t.Errorf("call %d: the memory hog under 64 MiB held 400 MB (exit %d)", i, r.code)
			}
		case 2:
			if f := strings.Fields(r.stdout); len(f) != 2 || f[0] != "60" || f[1] != "100000000" {
				t.Errorf("call %d: the call with large limits was held to another's: %q, stderr %q", i, r.stdout, r.stderr)
			}
		}
	}
	plans := []isolation.Plan{bomb, hog, free}
	for i := range 9 {
		check(i, i%3, runPooled(t, pool, plans[i%3]))
	}
	var wg sync.WaitGroup
	results := make([]result, 9)
	for i := range results {
		wg.Go(func() { results[i] = runPooled(t, pool, plans[i%3]) })
	}
	wg.Wait()
	for i, r := range results {
		check(100+i, i%3, r)
	}
	requireZygoteServed(t, pool, 18)
}
