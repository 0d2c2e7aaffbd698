package nsinit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// Round 10's attacks on the zygote's call thread, which now waits for the program's end in wait4
// and only then reads the close-on-exec pipe on which a child that failed before its exec said
// why (runProgram), and on its ready threads, which now wait in a blocking recvmsg with a receive
// timeout (receive).

// r10Case is one call of TestZygoteExecFailuresReportTheirOwn: its plan, and either the failure it
// must report (a text its Failure must hold, with the plan's own path) or the status it must end
// with (and no failure).
type r10Case struct {
	name    string
	p       isolation.Plan
	failure string // "" for a program that runs
	status  int
}

// r10ExecCases are plans whose exec fails in each way the kernel has, and plans whose program
// runs and ends with statuses a failed child's could be mistaken for (126, 127: the raw child's
// own exits) or by a signal, or leaves a child behind that holds its streams.
func r10ExecCases(t *testing.T) []r10Case {
	t.Helper()
	base := workTree(t, "/var/tmp")
	write := func(name, text string, mode os.FileMode) string {
		path := filepath.Join(base, name)
		if err := fixture.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	exe := func(path string, args ...string) isolation.Plan {
		p := plan(t, "/bin/true", nil)
		p.Path, p.Args, p.Exec = path, append([]string{filepath.Base(path)}, args...), append(p.Exec, path)
		return p
	}
	badInterp := write("badinterp", "#!/nonexistent/clihost-round10\n", 0o755)
	garbage := write("garbage", "\x7fELF this is not a program\n", 0o755)
	noExec := write("noexec", "#!/bin/sh\nexit 0\n", 0o644)
	trueData, err := os.ReadFile(realPath("/bin/true"))
	if err != nil {
		t.Fatal(err)
	}
	busy := write("busy", string(trueData), 0o755)
	// Held open for writing while the calls run: its exec is refused with ETXTBSY.
	w, err := os.OpenFile(busy, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	dir := filepath.Join(base, "rw")
	cases := []r10Case{
		{name: "bad interpreter", p: exe(badInterp), failure: "no such file or directory"},
		{name: "not a program", p: exe(garbage), failure: "exec format error"},
		{name: "not executable", p: exe(noExec), failure: "permission denied"},
		{name: "a directory", p: exe(dir), failure: "permission denied"},
		{name: "text busy", p: exe(busy), failure: "text file busy"},
		// One argument over MAX_ARG_STRLEN (32 pages).
		{name: "argument too long", p: exe(realPath("/bin/true"), strings.Repeat("a", 200<<10)), failure: "argument list too long"},
	}
	for _, code := range []int{0, 3, 126, 127} {
		cases = append(cases, r10Case{name: "exit " + strconv.Itoa(code), p: sh(t, "exit "+strconv.Itoa(code)), status: code})
	}
	cases = append(cases,
		r10Case{name: "killed", p: sh(t, "kill -KILL $$"), status: 128 + 9},
		// Its child keeps the streams open: the call ends with the program, not with the child.
		r10Case{name: "child left", p: sh(t, "sleep 30 & exit 5", "/bin/sleep"), status: 5},
		// It closes its streams and every descriptor it can before it exits.
		r10Case{name: "closes all", p: sh(t, "exec 0<&- 1>&- 2>&- 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; exit 9"), status: 9},
	)
	return cases
}

// check fails t unless r is what c must end with.
func (c r10Case) check(t *testing.T, round int, r result, took time.Duration) {
	t.Helper()
	t.Logf("round %d, %s: exit %d, failure %v", round, c.name, r.code, r.failure)
	if c.failure != "" {
		msg := fmt.Sprint(r.failure)
		if r.failure == nil || !strings.Contains(msg, "exec "+c.p.Path+":") || !strings.Contains(msg, c.failure) {
			t.Errorf("round %d, %s: exit %d, failure %v; want a failure of exec %s: ...%s", round, c.name, r.code, r.failure, c.p.Path, c.failure)
		}
		return
	}
	if r.failure != nil || r.code != c.status {
		t.Errorf("round %d, %s: exit %d, failure %v; want exit %d and no failure", round, c.name, r.code, r.failure, c.status)
	}
	if took > 20*time.Second { // a bound, not a measurement: the child left sleeps 30 s
		t.Errorf("round %d, %s: the call took %s: it waited for what the program left behind", round, c.name, took)
	}
}

// TestZygoteExecFailuresReportTheirOwn runs, several at once and over and over, calls whose exec
// fails in every way the kernel has (a missing interpreter, not a program, not executable, a
// directory, a file open for writing, an argument too long) beside calls whose program runs and
// exits 0, 3, 126 or 127 (the raw child's own exit statuses), is killed, leaves a child that holds
// its streams, or closes every descriptor: the zygote's descriptor table is shared by its threads,
// so one call's child is cloned holding the others' exec pipes. Each call must report its own
// outcome: its exec's failure, naming its own program and errno, or its program's status and no
// failure. Afterwards the zygote holds no more descriptors or children than before.
func TestZygoteExecFailuresReportTheirOwn(t *testing.T) {
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	cases := r10ExecCases(t)
	runPooled(t, pool, plan(t, "/bin/true", nil))
	fdsBefore, kidsBefore := zygoteBaseline(t, zpid)
	const rounds, atOnce = 3, 6
	sem := make(chan struct{}, atOnce)
	var wg sync.WaitGroup
	for round := range rounds {
		for i := range cases {
			c := cases[(i+round)%len(cases)]
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				start := time.Now()
				cmd, stdio := takeReady(t, pool, c.p, false)
				r := finishPooled(t, cmd, stdio)
				c.check(t, round, r, time.Since(start))
			})
		}
	}
	wg.Wait()
	requireZygoteServed(t, pool, 1+rounds*int64(len(cases)))
	zygoteBackTo(t, pool, zpid, fdsBefore, kidsBefore, 10*time.Second, "the calls")
}

// TestZygoteBurstIsServedAndCloseIsPrompt: many requests at once (more than the zygote has ready
// threads, which the kernel wakes one per request) are each served, with each call's own output;
// then, with the ready threads waiting in recvmsg, the pool's close ends the zygote at once (the
// host's shutdown wakes every waiter), not after their receive timeout or never.
func TestZygoteBurstIsServedAndCloseIsPrompt(t *testing.T) {
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	const calls = 16
	var wg sync.WaitGroup
	results := make([]result, calls)
	start := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			<-start
			results[i] = runPooled(t, pool, sh(t, "echo call-"+strconv.Itoa(i)+"; exit "+strconv.Itoa(i)))
		})
	}
	close(start)
	wg.Wait()
	for i, r := range results {
		if want := "call-" + strconv.Itoa(i) + "\n"; r.failure != nil || r.code != i || r.stdout != want {
			t.Errorf("call %d: exit %d, failure %v, stdout %q; want exit %d, %q", i, r.code, r.failure, r.stdout, i, want)
		}
	}
	requireZygoteServed(t, pool, calls)
	zygoteSteady(t, zpid)              // its ready threads are back in recvmsg
	time.Sleep(300 * time.Millisecond) // and well into their wait
	closed := make(chan time.Duration, 1)
	go func() {
		begin := time.Now()
		pool.Close()
		closed <- time.Since(begin)
	}()
	select {
	case took := <-closed:
		t.Logf("the pool closed in %s", took)
	case <-time.After(zygoteExitWait + 5*time.Second):
		t.Fatalf("the pool did not close within %s with the zygote's threads idle", zygoteExitWait+5*time.Second)
	}
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(zpid) + "/task"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the zygote %d runs on after its pool closed", zpid)
		}
	}
}

// TestZygoteDropsMalformedRequests sends the zygote, on the host's own socket, requests it must
// drop: a body that is not a header, a header whose descriptors are not as many as it says, and
// a header that names a negative count. Each request's descriptors are closed (the write end of a
// pipe sent with it is seen closed), and the zygote goes on serving calls.
func TestZygoteDropsMalformedRequests(t *testing.T) {
	pool := zygotePool(t)
	pool.mu.Lock()
	conn := pool.zyg.conn
	pool.mu.Unlock()
	for i, body := range [][]byte{
		[]byte("not a header"),
		mustJSON(t, zygoteHeader{Stdin: true, Tasks: 1}), // 6 descriptors said, 2 sent
		mustJSON(t, zygoteHeader{Tasks: -2}),
		make([]byte, 5000), // more than the zygote reads: truncated
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r2, w2, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Sendmsg(int(conn.Fd()), body, unix.UnixRights(int(w.Fd()), int(w2.Fd())), nil, 0); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		w.Close()
		w2.Close()
		for _, f := range []*os.File{r, r2} {
			done := make(chan error, 1)
			go func() { _, err := io.ReadAll(f); done <- err }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("request %d: %v", i, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("request %d: the zygote kept the descriptors of a malformed request", i)
			}
			f.Close()
		}
		if res := runPooled(t, pool, sh(t, "echo ok")); res.failure != nil || res.code != 0 || res.stdout != "ok\n" {
			t.Fatalf("after malformed request %d: exit %d, failure %v, stdout %q", i, res.code, res.failure, res.stdout)
		}
	}
	requireZygoteServed(t, pool, 4)
}

// mustJSON is v as JSON.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRound10StuckExecEndsAtItsDeadline: a program whose exec hangs (its interpreter on a FUSE mount
// no server answers) while its call thread waits for the program's end in wait4, not for the exec
// first: the call's deadline must end it (a killed status, not a success and not an exec failure
// of a program that may have run), and a call whose host lets go of it must end too, without
// leaving the zygote a thread, child or descriptor more.
func TestRound10StuckExecEndsAtItsDeadline(t *testing.T) {
	if testPool != nil {
		t.Skip("this is a pooled run (its own pool's zygote is what it attacks)")
	}
	requireRoot(t)
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	stuck := stuckExec(t)
	runPooled(t, pool, plan(t, "/bin/true", nil))
	fdsBefore, kidsBefore := zygoteBaseline(t, zpid)
	stuckPlan := func(timeout time.Duration) isolation.Plan {
		p := plan(t, "/bin/true", nil)
		p.Path, p.Exec, p.Timeout = stuck, append(p.Exec, stuck), timeout
		return p
	}
	// At its deadline.
	cmd, stdio := takeReady(t, pool, stuckPlan(500*time.Millisecond), false)
	done := make(chan result, 1)
	go func() { done <- finishPooled(t, cmd, stdio) }()
	select {
	case r := <-done:
		if r.code == 0 || r.failure != nil && strings.Contains(r.failure.Error(), "exec ") {
			t.Errorf("the stuck exec at its deadline: exit %d, failure %v; want it killed", r.code, r.failure)
		}
		t.Logf("at its deadline: exit %d, failure %v", r.code, r.failure)
	case <-time.After(20 * time.Second):
		t.Fatalf("the stuck exec's call did not end within 20s of its 500ms deadline")
	}
	// Let go of by its host (no deadline near).
	cmd, stdio = takeReady(t, pool, stuckPlan(time.Hour), false)
	time.Sleep(300 * time.Millisecond) // it reaches its exec
	select {
	case <-cmd.Ended():
		t.Fatalf("the stuck exec ended by itself (%v): the attack proves nothing", cmd.Failure())
	default:
	}
	cmd.report.Close()
	stdio.Out.Close()
	stdio.Err.Close()
	// A plain call is served meanwhile.
	if r := runPooled(t, pool, sh(t, "exit 4")); r.code != 4 || r.failure != nil {
		t.Errorf("a plain call beside the stuck ones: exit %d, failure %v", r.code, r.failure)
	}
	requireZygoteServed(t, pool, 4)
	zygoteBackTo(t, pool, zpid, fdsBefore, kidsBefore, 15*time.Second, "the stuck execs ended")
}

// TestRound10UnmountedUnderSteadyCalls: the ready threads now look at the host's mount table only
// when their wait for a call times out or a call comes. While calls come steadily (more often than
// the receive timeout), a file system the host unmounted must still be let go of by every thread
// within a few timeouts, and the calls must see the host's table as it is now.
func TestRound10UnmountedUnderSteadyCalls(t *testing.T) {
	if testPool != nil {
		t.Skip("this is a pooled run (its own pool's zygote is what it attacks)")
	}
	requireRoot(t)
	base := workTree(t, "/var/tmp")
	mnt := filepath.Join(base, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		fixture.Missing(t, "cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(mnt, "marker"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pool := zygotePool(t)
	pid := zygotePID(t, pool)
	holders := func() []string { return threadsShowing(pid, mnt) }
	probe := sh(t, "cat "+filepath.Join(mnt, "marker")+" 2>/dev/null || echo none", "/bin/cat")
	probe.ReadOnly = append(probe.ReadOnly, base)
	if r := runPooled(t, pool, probe); r.stdout != "old\n" {
		t.Fatalf("before the unmount the call reads %q (exit %d, %v)", r.stdout, r.code, r.failure)
	}
	if len(holders()) == 0 {
		t.Fatal("no zygote thread holds the tmpfs: the test sees nothing")
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var after []string
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			r := runPooled(t, pool, probe)
			mu.Lock()
			after = append(after, r.stdout)
			mu.Unlock()
		}
	})
	time.Sleep(600 * time.Millisecond)
	if err := unix.Unmount(mnt, 0); err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	unmounted := time.Now()
	mu.Lock()
	seen := len(after)
	mu.Unlock()
	deadline := unmounted.Add(3*zygoteIdle + 2*time.Second)
	for len(holders()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	left := holders()
	time.Sleep(600 * time.Millisecond) // calls after the unmount
	close(stop)
	wg.Wait()
	if len(left) > 0 {
		t.Fatalf("zygote threads %v still hold the tmpfs %s after the unmount, with calls coming every 250ms", left, time.Since(unmounted))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(after) <= seen+1 {
		t.Fatalf("too few calls after the unmount to tell: %q", after)
	}
	// The last calls were all taken after the threads let go: each sees the host's table now.
	for _, out := range after[len(after)-2:] {
		if out != "none\n" {
			t.Errorf("a call after the unmount reads %q from the unmounted tmpfs (all: %q)", out, after)
		}
	}
}

// TestZygoteDeadlineMidExec: calls whose deadline passes while their sandbox is built or their
// program execs (1 to 30 ms), for programs that would run for seconds and for execs that fail,
// several at once. Each must end promptly, never report a program that would have run for seconds
// as exited 0, nor an exec failure for a program other than its own; afterwards the zygote holds no
// more descriptors or children than before.
func TestZygoteDeadlineMidExec(t *testing.T) {
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	cases := r10ExecCases(t)[:6] // the exec failures
	runPooled(t, pool, plan(t, "/bin/true", nil))
	fdsBefore, kidsBefore := zygoteBaseline(t, zpid)
	slow := sh(t, "sleep 3; exit 0", "/bin/sleep")
	const calls, atOnce = 60, 6
	sem := make(chan struct{}, atOnce)
	var wg sync.WaitGroup
	for i := range calls {
		p, failure := slow, ""
		if i%3 == 1 {
			c := cases[i%len(cases)]
			p, failure = c.p, c.failure
		}
		p.Timeout = time.Duration(1+i%30) * time.Millisecond
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			start := time.Now()
			cmd, stdio := takeReady(t, pool, p, false)
			r := finishPooled(t, cmd, stdio)
			took := time.Since(start)
			t.Logf("call %d (deadline %s): exit %d, failure %v", i, p.Timeout, r.code, r.failure)
			switch {
			case took > 10*time.Second: // a bound, not a measurement
				t.Errorf("call %d (deadline %s) took %s", i, p.Timeout, took)
			case failure == "" && r.failure == nil && r.code == 0:
				t.Errorf("call %d: a program that sleeps 3s reported exit 0 within its %s deadline", i, p.Timeout)
			case r.failure != nil && strings.Contains(r.failure.Error(), "exec ") && !strings.Contains(r.failure.Error(), "exec "+p.Path+":"):
				t.Errorf("call %d: an exec failure of another program: %v", i, r.failure)
			case r.failure != nil && strings.Contains(r.failure.Error(), "clone: cannot allocate memory"):
				t.Errorf("call %d: the deadline passed before the clone, and that is reported as a failed exec: %v", i, r.failure)
			case failure != "" && r.failure != nil && strings.Contains(r.failure.Error(), "exec ") && !strings.Contains(r.failure.Error(), failure):
				t.Errorf("call %d: exec failure %v, want %q", i, r.failure, failure)
			}
		})
	}
	wg.Wait()
	requireZygoteServed(t, pool, 1+calls)
	zygoteBackTo(t, pool, zpid, fdsBefore, kidsBefore, 10*time.Second, "the calls")
}

// TestRound10DeadlineBeforeTheProgramIsNoExecFailure: a call whose deadline passes after its
// sandbox was built but before its program was cloned (here: while the host's gate, the git rule's
// snapshot, still runs; a loaded host or a slow plan path opens the same window) has had its PID 1
// killed, and the clone into the dying PID namespace fails (ENOMEM). That is the deadline, not a
// failed exec: the call must not report "exec <program>: clone: cannot allocate memory", which the
// runner and host turn into sandbox_unavailable ("not started"), with the kernel-setup hint, for
// what is a timeout.
func TestRound10DeadlineBeforeTheProgramIsNoExecFailure(t *testing.T) {
	if testPool != nil {
		t.Skip("this is a pooled run (its own pool's zygote is what it attacks)")
	}
	pool := zygotePool(t)
	runPooled(t, pool, sh(t, "true")) // a thread is ready
	p := sh(t, "exit 0")
	p.Timeout = 100 * time.Millisecond
	gate := func() error {
		time.Sleep(400 * time.Millisecond) // past the deadline; the zygote waits for the gate
		return nil
	}
	cmd, stdio, err := pool.Take(p, false, gate)
	if err != nil || cmd == nil || !cmd.FromZygote() {
		t.Fatalf("Take: %v, %v; want a sandbox of the zygote (stats %+v)", cmd, err, pool.Stats())
	}
	r := finishPooled(t, cmd, stdio)
	t.Logf("exit %d, failure %v", r.code, r.failure)
	if r.code == 0 && r.failure == nil {
		t.Fatal("the program ran after its deadline")
	}
	if r.failure != nil && strings.Contains(r.failure.Error(), "exec "+p.Path+":") {
		t.Errorf("the deadline is reported as a failure of the program's exec (sandbox unavailable, not started): %v", r.failure)
	}
}
