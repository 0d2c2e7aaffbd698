package nsinit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// Round 11's attacks on the sandboxes the zygote builds ahead of their calls (zygote_ahead.go):
// a call that runs in a sandbox built ahead must get what a sandbox built for it would give it,
// or be built the usual way; and it must keep its deadline and not hang the host.

// r11Stall names, once stall is set, the requests of the zygote's processes that no longer run as
// root (a program's process before its exec, which carries the zygote's command line), or of all
// of them with rootToo (a build, a sandbox built ahead as its call comes): the predicate of the tests' hostile FUSE server (fixture.HostileFUSEServer),
// whose root holds one directory, "d", which lists as empty. Everything else (the host's looks)
// is answered.
type r11Stall struct{ stall, rootToo atomic.Bool }

func (s *r11Stall) names(uid, pid uint32) bool {
	if !s.stall.Load() || uid == 0 && !s.rootToo.Load() {
		return false
	}
	return strings.HasPrefix(tgidCmdline(pid), procName+" "+zygoteMarker) || strings.HasPrefix(cmdline(int(pid)), procName+" "+zygoteMarker)
}

// r11StallingFUSE mounts the hostile FUSE server with an r11Stall and returns both with the
// mountpoint.
func r11StallingFUSE(t *testing.T) (*r11Stall, *fixture.FUSEServer, string) {
	t.Helper()
	st := &r11Stall{}
	srv, mnt := fixture.HostileFUSEServer(t, st.names)
	return st, srv, mnt
}

// TestR11AheadCallOnAStalledSplitDirectoryKeepsItsDeadline: a plan whose read-only tree on a
// FUSE (or NFS) mount is split around a deny path has a sandbox built ahead; then the file
// system stops answering the zygote (a hostile server that sees who asks, or an NFS server gone
// away). A sandbox built for the call would write "pid N" before it resolves anything, so the
// call's deadline (the zygote's watch) and the host's kill of its process group end it; the
// sandbox built ahead looks at its split directories (fits) before it says "pid N": the host's
// Take must still return, and the call must end by its deadline, not hang.
func TestR11AheadCallOnAStalledSplitDirectoryKeepsItsDeadline(t *testing.T) {
	st, srv, mnt := r11StallingFUSE(t)
	pool := zygotePool(t)
	d := filepath.Join(mnt, "d")
	p := plan(t, "/bin/true", nil)
	p.ReadOnly = append(p.ReadOnly, d)
	p.Deny = []string{filepath.Join(d, "secret")} // absent: d is split around it (listed, kept)
	awaitAhead(t, pool, p)
	st.rootToo.Store(true)
	st.stall.Store(true)
	call := p
	call.Timeout = time.Second
	type taken struct {
		cmd   *Cmd
		stdio *Stdio
		err   error
	}
	took := make(chan taken, 1)
	start := time.Now()
	go func() {
		cmd, stdio, err := pool.Take(call, false, nil)
		took <- taken{cmd, stdio, err}
	}()
	var tk taken
	select {
	case tk = <-took:
	case <-time.After(10 * time.Second): // a bound, not a measurement: the deadline is 1 s
		t.Errorf("Pool.Take of a call with a 1s deadline did not return within 10s: the sandbox built ahead hangs on its split directory before it says its PID 1 (%d zygote requests held by the file system)", len(srv.Held()))
		srv.Release() // the stalled look fails: the call goes stale and is built the usual way
		tk = <-took
	}
	if tk.err != nil || tk.cmd == nil {
		t.Logf("take: %v", tk.err)
		return
	}
	select {
	case <-tk.cmd.Ended():
	case <-time.After(15 * time.Second):
		t.Errorf("the call did not end within 15s of its start although its deadline was 1s")
	}
	for _, f := range []*os.File{tk.stdio.Out, tk.stdio.Err} {
		f.Close()
	}
	t.Logf("call ended after %v, %d requests held", time.Since(start), len(srv.Held()))
	tk.cmd.report.Close() // the host lets go of the call
	srv.Release()
	closeWithin(t, pool)
}

// TestR11AheadThreadIsNotSignalableByThePlansUser: a sandbox built ahead waits (up to 30 s after
// every paced call) on a thread of the root zygote that already runs with the plan's uid (the
// caller's, on a root daemon). A process of that uid outside any sandbox, which the daemon does
// not trust, must not be able to signal that thread: SIGSTOP or SIGKILL to one thread acts on the
// whole zygote, which builds every user's sandboxes.
func TestR11AheadThreadIsNotSignalableByThePlansUser(t *testing.T) {
	pool := zygotePool(t)
	if !pool.root {
		fixture.Missing(t, "the plan's uid is the host user's on a rootless host")
	}
	p := sh(t, "true")
	awaitAhead(t, pool, p)
	zpid := zygotePID(t, pool)
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(zpid) + "/task")
	if len(tasks) < 3 {
		t.Fatalf("the zygote has %d threads: the test sees nothing", len(tasks))
	}
	for _, task := range tasks {
		tid := task.Name()
		if uid := r11ThreadUID(zpid, tid); uid == strconv.Itoa(nobody) {
			t.Errorf("zygote thread %s runs as the plan's uid while a sandbox built ahead waits", tid)
		}
		// kill(2) with a thread's id checks that thread's credentials.
		if out, err := asNobody("kill -0 " + tid).CombinedOutput(); err == nil {
			t.Errorf("a process of uid %d may signal zygote %d's thread %s (a sandbox built ahead waiting for its call): kill -STOP would stop the zygote of every user (%s)", nobody, zpid, tid, out)
		}
	}
}

// r11ThreadUID is the real uid of thread tid of process pid, or "".
func r11ThreadUID(pid int, tid string) string {
	st, _ := statusFile("/proc/" + strconv.Itoa(pid) + "/task/" + tid + "/status")
	uid, _, _ := strings.Cut(st["Uid"], "\t")
	return uid
}

// TestR11AheadSandboxRefusesAPlanPathWhoseParentBecameALink: a sandbox built for a call refuses
// a plan path with a symbolic link in it (openPlan: the tree changed after the policy check). A
// parent directory renamed and replaced by a link to its new name after the sandbox was built
// ahead leaves every checked inode the same (the host's lstat follows the link) and no mount
// shows it: the call must not run where a sandbox built for it is refused.
func TestR11AheadSandboxRefusesAPlanPathWhoseParentBecameALink(t *testing.T) {
	pool := zygotePool(t)
	base := aheadTree(t)
	conf := filepath.Join(base, "ro/sub/conf")
	fixture.WriteIn(t, conf, map[string]string{"file": "CONF\n"})
	p := sh(t, `cat "$0/file"`, "/bin/cat")
	p.Args = append(p.Args, conf)
	p.ReadOnly = append(p.ReadOnly, conf)
	awaitAhead(t, pool, p)
	sub := filepath.Join(base, "ro/sub")
	if err := os.Rename(sub, sub+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub.real", sub); err != nil {
		t.Fatal(err)
	}
	fresh := run(t, p) // built for the call: refused
	r, ahead := runCounting(t, pool, p)
	if ahead || (fresh.failure != nil) != (r.failure != nil) {
		t.Errorf("a plan path whose parent became a symbolic link: ahead %t, failure %v, stdout %q; a sandbox built for the call: failure %v", ahead, r.failure, r.stdout, fresh.failure)
	}
}

// TestR11AheadSandboxMasksAnAbsentDenyPathMadeSince: a deny path inside a writable root that did
// not exist when the policy was checked (Plan.Absent) nor when the sandbox was built ahead, then
// made by another writer of the workspace (a concurrent call, an editor) as a hard link to a
// secret, is masked for the next call as in a sandbox built for it.
func TestR11AheadSandboxMasksAnAbsentDenyPathMadeSince(t *testing.T) {
	pool := zygotePool(t)
	base := aheadTree(t)
	rw := filepath.Join(base, "rw")
	env := filepath.Join(rw, ".env")
	p := sh(t, `cat "$0" 2>&1; echo done`, "/bin/cat")
	p.Args = append(p.Args, env)
	p.ReadWrite = []string{rw}
	p.Deny = []string{env}
	p.Absent = []string{env}
	awaitAhead(t, pool, p)
	secret := filepath.Join(rw, "elsewhere")
	if err := os.WriteFile(secret, []byte("LINKED SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, env); err != nil {
		t.Fatal(err)
	}
	// The linked file itself stays readable (it is no deny path): only its deny name must not be.
	r, ahead := runCounting(t, pool, p)
	if strings.Contains(r.stdout, "LINKED SECRET") || !strings.Contains(r.stdout, "done") {
		t.Errorf("a deny path made since the sandbox was built ahead: %q (ahead %t), want it masked", r.stdout, ahead)
	}
}

// TestR11AheadCallKeepsItsOwnUmaskAndRlimits: the host's umask and a plan's file size limit are
// the call's, not those the sandbox built ahead was asked with.
func TestR11AheadCallKeepsItsOwnUmaskAndRlimits(t *testing.T) {
	pool := zygotePool(t)
	base := aheadTree(t)
	rw := filepath.Join(base, "rw")
	p := sh(t, `f="$0/out.$$"; : > "$f"; stat -c %a "$f"; head -c 65536 /dev/zero > /tmp/big; echo "status $?"; wc -c < /tmp/big`, "/usr/bin/stat", "/usr/bin/head", "/usr/bin/wc")
	p.Args = append(p.Args, rw)
	p.ReadWrite = []string{rw}
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	awaitAhead(t, pool, p)
	outs, _ := filepath.Glob(filepath.Join(rw, "out.*")) // the earlier calls' (each program is pid 2)
	for _, f := range outs {
		os.Remove(f)
	}
	unix.Umask(0o077)
	r, ahead := runCounting(t, pool, p)
	if !strings.HasPrefix(r.stdout, "600\n") {
		t.Errorf("the host's umask 077 at the call: mode %q (ahead %t), want 600", r.stdout, ahead)
	}
	unix.Umask(0o022)
	limited := p
	limited.Limits = isolation.Limits{FileSize: 4096}
	r, ahead = runAhead(t, pool, p, limited)
	if !strings.Contains(r.stdout, "\n4096\n") {
		t.Errorf("a file size limit of 4096 in a sandbox built ahead without one: %q (ahead %t)", r.stdout, ahead)
	}
	if !ahead {
		t.Errorf("the limited call did not run in a sandbox built ahead in 5 tries: the test did not reach it (stats %+v)", pool.Stats())
	}
}

// TestR11AheadPlansApartUnderPacedConcurrentCallers: four callers, each with its own plan (each
// denies the others' files and reads its own), call paced so that sandboxes are built ahead for
// all of them while the others run. No call may read another plan's file nor miss its own, and the
// zygote must hold no more descriptors or children once they stop.
func TestR11AheadPlansApartUnderPacedConcurrentCallers(t *testing.T) {
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	fdsBefore, kidsBefore := zygoteBaseline(t, zpid)
	base := aheadTree(t)
	ro := filepath.Join(base, "ro")
	const callers = 4
	files := make([]string, callers)
	for i := range files {
		files[i] = filepath.Join(ro, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(files[i], []byte(fmt.Sprintf("CONTENT-%d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plans := make([]isolation.Plan, callers)
	for i := range plans {
		p := sh(t, `cat "$@" 2>/dev/null; true`, "/bin/cat")
		p.Args = append(p.Args, "sh")
		p.Args = append(p.Args, files...)
		p.ReadOnly = append(p.ReadOnly, ro)
		for j, f := range files {
			if j != i {
				p.Deny = append(p.Deny, f)
			}
		}
		plans[i] = p
	}
	// Two of the plans have a sandbox built ahead when the callers start (calls at once seldom
	// leave the zygote the pause it builds ahead after).
	awaitAhead(t, pool, plans[0])
	awaitAhead(t, pool, plans[1])
	aheadBefore := pool.Stats().ZygoteAhead
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	deadline := time.Now().Add(6 * time.Second)
	for i := range callers {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline); n++ {
				cmd, stdio, err := pool.Take(plans[i], false, nil)
				if err != nil || cmd == nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				r := finishPooled(t, cmd, stdio)
				if want := fmt.Sprintf("CONTENT-%d\n", i); r.stdout != want {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("caller %d call %d: %q, want %q", i, n, r.stdout, want))
					mu.Unlock()
				}
				time.Sleep(time.Duration(15+5*i) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("%d calls saw another plan's files or missed their own, first: %s", len(bad), bad[0])
	}
	t.Logf("stats %+v", pool.Stats())
	if pool.Stats().ZygoteAhead == aheadBefore {
		t.Error("no call ran in a sandbox built ahead: the test did not reach them")
	}
	// Sandboxes built ahead wait at most aheadIdle; the host's ends are closed by Close.
	pool.zygote().closeAhead()
	zygoteBackTo(t, pool, zpid, fdsBefore, kidsBefore, 10*time.Second, "paced concurrent callers")
}

// TestR11StuckAheadBuildsDoNotPileUp: a file system that answers every call's build but not a
// build ahead (a FUSE server that stalls the zygote's looks when the host did not look just
// before: the daemon compiles each call's policy on the host first, a build ahead has no call)
// leaves one zygote thread stuck in the kernel for every plan that repeats, with its PID 1 and
// mount namespace, while every call succeeds. A stuck call counts toward zygoteMaxAbandoned (the
// pool then starts another zygote); stuck builds ahead must be bounded as well, not pile up in one
// zygote without end.
func TestR11StuckAheadBuildsDoNotPileUp(t *testing.T) {
	st, srv, mnt := r11StallingFUSE(t)
	st.rootToo.Store(true)
	pool := zygotePool(t)
	d := filepath.Join(mnt, "d")
	const plans = 3 * zygoteMaxAbandoned
	for i := range plans {
		p := plan(t, "/bin/true", nil)
		p.ReadOnly = append(p.ReadOnly, d)
		p.Deny = []string{filepath.Join(d, fmt.Sprintf("secret%d", i))} // another plan each
		for range 2 {
			st.stall.Store(false)
			if r := runPooled(t, pool, p); r.code != 0 {
				t.Fatalf("plan %d: exit %d, failure %v", i, r.code, r.failure)
			}
			st.stall.Store(true) // the pause after the call: the build ahead is left unanswered
			time.Sleep(15 * aheadPause)
		}
	}
	st.stall.Store(false)
	held := srv.Held()
	zpid := zygotePID(t, pool)
	inZygote := 0
	for _, tid := range held {
		if tgidOf(tid) == zpid {
			inZygote++
		}
	}
	t.Logf("%d builds ahead stuck, %d of them in the current zygote %d (stats %+v)", len(held), inZygote, zpid, pool.Stats())
	if len(held) == 0 {
		t.Fatal("no build ahead was stuck: the test did not reach them")
	}
	if inZygote > zygoteMaxAbandoned {
		t.Errorf("the zygote %d has %d threads stuck in the kernel on builds ahead (%d plans repeated), more than the %d abandoned calls a zygote may keep", zpid, inZygote, plans, zygoteMaxAbandoned)
	}
	srv.Release()
	closeWithin(t, pool)
}

// TestR11CloseWhileASandboxWaitsAhead: the daemon's stop while a sandbox built ahead waits for its
// call returns at once, and the zygote (with the waiting thread, its PID 1 and its mounts) exits.
func TestR11CloseWhileASandboxWaitsAhead(t *testing.T) {
	pool := zygotePool(t)
	p := sh(t, "true")
	awaitAhead(t, pool, p)
	zpid := zygotePID(t, pool)
	start := time.Now()
	closeWithin(t, pool)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Pool.Close took %v with a sandbox built ahead waiting", d)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(zpid) + "/task"); err != nil {
			return
		}
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(zpid) + "/stat"); strings.Contains(string(b), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the zygote %d still runs 5s after Close with a sandbox built ahead waiting", zpid)
		}
	}
}
