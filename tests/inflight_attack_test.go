package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// TestOneMemberCannotTakeEveryCall: a root clihostd shared by two users on one socket, with
// --max-calls 3 --max-calls-per-caller 2. The member fires six calls at once; two run and four are
// refused at once with rate_limited (retryable, nothing run). While the member's two run, root's
// two calls come: one takes the last place of the host's three, the other is refused at the total
// bound. Before the bound a member could start any number of sandboxes (threads, PID namespaces,
// control groups), and with them take the host from the other users.
func TestOneMemberCannotTakeEveryCall(t *testing.T) {
	bundles := t.TempDir()
	fixture.WriteIn(t, bundles, fixture.Sleep(30_000))
	d := rootDaemon(t, "--bundles", bundles, "--max-calls", "3", "--max-calls-per-caller", "2")
	member, own := memberProject(t)

	var mu sync.Mutex
	var memberOK, memberRefused int
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			r := d.ctlAs(t, member, "call", "sleep", "nap", "--workspace", own, "--input", `{"s": "4"}`)
			env := parseEnvelope(t, r)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case env.OK:
				memberOK++
			case env.Error != nil && env.Error.Code == "rate_limited":
				memberRefused++
				if !strings.Contains(env.Error.Hint, "--max-calls-per-caller") || !strings.Contains(r.stdout, `"retryable": true`) && !strings.Contains(r.stdout, `"retryable":true`) {
					t.Errorf("the member's refusal does not name its bound or is not retryable:\n%s", r.stdout)
				}
			default:
				t.Errorf("the member's call: %+v\n%s", env.Error, r.stderr)
			}
		})
	}
	// Root's calls come once the member's two run.
	waitUntil(t, 20*time.Second, "two of the member's sleeps run", func() bool { return len(sleepersOf(member.UID)) == 2 })
	var rootOK, rootRefused int
	var rmu sync.Mutex
	var rwg sync.WaitGroup
	for range 2 {
		rwg.Go(func() {
			r := d.ctl(t, "call", "sleep", "nap", "--workspace", d.ws, "--input", `{"s": "0.5"}`)
			env := parseEnvelope(t, r)
			rmu.Lock()
			defer rmu.Unlock()
			switch {
			case env.OK:
				rootOK++
			case env.Error != nil && env.Error.Code == "rate_limited" && strings.Contains(env.Error.Hint, "--max-calls"):
				rootRefused++
			default:
				t.Errorf("root's call while the member holds its two: %+v\n%s", env.Error, r.stderr)
			}
		})
	}
	rwg.Wait()
	if n := len(sleepersOf(member.UID)); n != 2 {
		t.Errorf("%d of the member's sleeps run after root's calls, want its 2 still running", n)
	}
	wg.Wait()
	if memberOK != 2 || memberRefused != 4 {
		t.Errorf("the member's six calls at once: %d ran, %d refused; want 2 and 4", memberOK, memberRefused)
	}
	if rootOK != 1 || rootRefused != 1 {
		t.Errorf("root's two calls beside the member's two: %d ran, %d refused; want 1 and 1 (the host's bound is 3)", rootOK, rootRefused)
	}
	// Every place is back: the member's six run, two at a time.
	for range 3 {
		var again sync.WaitGroup
		for range 2 {
			again.Go(func() {
				if env := parseEnvelope(t, d.ctlAs(t, member, "call", "sleep", "nap", "--workspace", own, "--input", `{"s": "0.1"}`)); !env.OK {
					t.Errorf("the member's call once its earlier calls ended: %+v", env.Error)
				}
			})
		}
		again.Wait()
	}
}

// TestAStuckSandboxKeepsItsCallersPlace: the member's call runs cat on a file system whose server
// never answers cat: SIGKILL does not end a process blocked on it, so after its timeout, the grace
// and the runner's wait the call returns without its sandbox, which still holds a thread, a PID
// namespace and a control group. With --max-calls-per-caller 1 the member's next call is refused
// until that sandbox has ended (timed-out calls cannot pile such sandboxes up), while root's
// calls run; once the server answers, the member's calls run again.
func TestAStuckSandboxKeepsItsCallersPlace(t *testing.T) {
	needLong(t)
	fixture.Slow(t)
	// Not under /tmp, which a sandbox replaces with its own: a bundle's grant there is the call's.
	t.Setenv("TMPDIR", "/var/tmp")
	srv, mnt := fixture.HostileFUSEServer(t, func(_, pid uint32) bool { return commOf(pid) == "cat" })
	bundles := t.TempDir()
	fixture.WriteIn(t, bundles, fixture.Sleep(30_000))
	fixture.WriteIn(t, bundles, map[string]string{
		"stuck/CLI.md": strings.Replace(fixture.CLI("cat", "stuck", "  read: ./tools/read/TOOL.md\n"),
			"read: []", `read: ["`+filepath.Join(mnt, "d")+`"]`, 1),
		"stuck/tools/read/TOOL.md": `---
name: Read
id: stuck.read
description: Reads a file of a file system that never answers.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: string }
timeout_ms: 1000
runner: { cli: ../../CLI.md, argv: ["` + filepath.Join(mnt, "d", "x") + `"] }
---
`,
	})
	d := rootDaemon(t, "--bundles", bundles, "--max-calls-per-caller", "1")
	member, own := memberProject(t)

	r := d.ctlAs(t, member, "call", "stuck", "read", "--workspace", own)
	if env := parseEnvelope(t, r); env.OK || env.Error.Code != "sandbox_unavailable" || !strings.Contains(env.Error.Message, "blocked in the kernel") ||
		!strings.Contains(env.Error.Hint, "may have run") {
		t.Fatalf("the member's call on the stalled file system: %+v, want sandbox_unavailable, its sandbox blocked in the kernel, saying the command may have run\n%s", env.Error, r.stderr)
	}
	if len(srv.Held()) == 0 {
		t.Fatal("cat never asked the stalled file system: the attack did not happen")
	}
	env := parseEnvelope(t, d.ctlAs(t, member, "call", "sleep", "nap", "--workspace", own, "--input", `{"s": "0"}`))
	if env.OK || env.Error.Code != "rate_limited" {
		t.Fatalf("the member's next call while its stuck sandbox lives: %+v, want rate_limited", env.Error)
	}
	if env := parseEnvelope(t, d.ctl(t, "call", "sleep", "nap", "--workspace", d.ws, "--input", `{"s": "0"}`)); !env.OK {
		t.Fatalf("root's call while the member's stuck sandbox lives: %+v", env.Error)
	}
	if got := inFlightMetric(t, d); got != 1 {
		t.Errorf("clihost_calls_in_flight = %d while the member's stuck sandbox lives, want 1", got)
	}
	srv.Release()
	waitUntil(t, 30*time.Second, "the member's call runs once its stuck sandbox ended", func() bool {
		env := parseEnvelope(t, d.ctlAs(t, member, "call", "sleep", "nap", "--workspace", own, "--input", `{"s": "0"}`))
		if !env.OK && env.Error.Code != "rate_limited" {
			t.Fatalf("the member's call once the file system answers: %+v", env.Error)
		}
		return env.OK
	})
}

// memberProject is the member of the socket's group (memberName) and a project of its own, no
// other user's to read.
func memberProject(t *testing.T) (fixture.TestUser, string) {
	t.Helper()
	member := fixture.User(t, memberName, sockGroup, shareGroup)
	own := filepath.Join(member.Home, "project")
	privateDir(t, own, member.UID, member.GID, 0o700)
	return member, own
}

// sleepersOf lists the sleep processes of uid.
func sleepersOf(uid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || commOf(uint32(pid)) != "sleep" {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// commOf is the command name of process (or thread) pid, "" once it is gone.
func commOf(pid uint32) string {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// waitUntil polls cond every 50 ms until it holds, failing t after timeout: what did not happen.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
	}
}

// inFlightMetric is d's clihost_calls_in_flight.
func inFlightMetric(t *testing.T, d *daemonProc) int {
	t.Helper()
	for _, line := range strings.Split(d.metrics(t), "\n") {
		if v, ok := strings.CutPrefix(line, "clihost_calls_in_flight "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("clihost_calls_in_flight %q", v)
			}
			return n
		}
	}
	t.Fatal("no clihost_calls_in_flight in the metrics")
	return 0
}

// TestSetupAndLoginCountAmongCallsInFlight: setup and login run the bundle's programs (its version
// check, its steps, the login's checks for up to ten minutes) for their caller, so they take a place
// among its calls in flight as a call does: with --max-calls-per-caller 1 and a call of the caller
// running, both are refused with rate_limited; once it ended, setup runs.
func TestSetupAndLoginCountAmongCallsInFlight(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "logged-in.json")
	writeFile(t, flag, "false")
	dir := t.TempDir()
	fixture.WriteIn(t, dir, fixture.Sleep(30_000))
	writeAcct(t, dir, flag, flag)
	d := startDaemon(t, t.TempDir(), "--bundles", dir, "--max-calls-per-caller", "1")
	ws := []string{"--workspace", d.ws}
	napping := make(chan result, 1)
	go func() {
		napping <- d.ctl(t, append([]string{"call", "sleep", "nap", "--input", `{"s": "3"}`}, ws...)...)
	}()
	waitUntil(t, 20*time.Second, "the caller's nap is in flight", func() bool { return inFlightMetric(t, d) == 1 })
	if r := d.ctl(t, append([]string{"setup", "acct", "--value", "token=s3cret"}, ws...)...); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "rate_limited") {
		t.Errorf("setup while the caller's one call runs: exit %d, want rate_limited\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := d.ctl(t, append([]string{"login", "acct", "--wait", "1s"}, ws...)...); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "rate_limited") {
		t.Errorf("login while the caller's one call runs: exit %d, want rate_limited\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := <-napping; r.code != 0 {
		t.Fatalf("the nap: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := d.ctl(t, append([]string{"setup", "acct", "--value", "token=s3cret"}, ws...)...); r.code != 0 {
		t.Errorf("setup once the call ended: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestOneMembersStuckRequestsLockOutNoOtherCaller: a member whose requests hang in the kernel for
// good (its workspace on a file system that does not answer) and whose clients have gone fills
// its own places, and only those. With --max-calls 2 --max-calls-per-caller 2 its two stuck
// requests used to fill the host's total too, and every other user's calls were refused until the
// daemon restarted (four such members at the defaults). Requests whose caller stopped waiting for
// them count against their caller's bound, and against a larger bound of their own
// (clihost_calls_abandoned), not against --max-calls.
func TestOneMembersStuckRequestsLockOutNoOtherCaller(t *testing.T) {
	fixture.Slow(t)
	t.Setenv("TMPDIR", "/var/tmp") // not under /tmp, which a sandbox replaces
	d := rootDaemon(t, "--max-calls", "2", "--max-calls-per-caller", "2")
	member, own := memberProject(t)
	srv, mnt := fixture.HostileFUSEServer(t, func(_, pid uint32) bool { return commOf(pid) == "clihostd" })
	body := `{"bundle": "id", "tool": "who", "input": {}, "workspace": "` + filepath.Join(mnt, "d") + `"}`
	out, _ := d.curlAs(member, "/v1/call?n=[1-10]", body, "-Z", "--parallel-immediate", "--max-time", "2")
	if len(srv.Held()) == 0 {
		t.Fatalf("the daemon never asked the stalled file system: the attack did not happen\n%s", out)
	}
	// The daemon sees the clients' connections close at once; the member's two places turn abandoned.
	refused := 0
	waitUntil(t, 10*time.Second, "root's call to run while one member's requests are stuck", func() bool {
		env := parseEnvelope(t, d.ctl(t, "call", "id", "who", "--workspace", d.ws))
		if !env.OK && refused == 0 {
			t.Logf("root's call: %+v", env.Error)
		}
		refused++
		return env.OK
	})
	if n := metricValue(t, d, "clihost_calls_abandoned"); n != 2 {
		t.Errorf("clihost_calls_abandoned %d, want the member's 2 stuck requests", n)
	}
	// The member's own places stay taken: its next call, in a workspace that answers, is refused.
	env := parseEnvelope(t, d.ctlAs(t, member, "call", "id", "who", "--workspace", own))
	if env.OK || env.Error == nil || env.Error.Code != "rate_limited" {
		t.Errorf("the member's call while its two places are stuck: %+v; want rate_limited", env.Error)
	}
	srv.Release()
	waitUntil(t, 10*time.Second, "the stuck requests to give their places back", func() bool {
		return metricValue(t, d, "clihost_calls_abandoned") == 0 && inFlightMetric(t, d) == 0
	})
	if env := parseEnvelope(t, d.ctlAs(t, member, "call", "id", "who", "--workspace", own)); !env.OK {
		t.Errorf("the member's call once its requests came back: %+v", env.Error)
	}
}

// metricValue is the value of the daemon's metric name (a line "name value"), or -1 when the
// metrics have no such line.
func metricValue(t *testing.T, d *daemonProc, name string) int {
	t.Helper()
	for _, line := range strings.Split(d.metrics(t), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s %q", name, v)
			}
			return n
		}
	}
	return -1
}
