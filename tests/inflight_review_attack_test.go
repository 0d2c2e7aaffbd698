package tests

// Outside review of clihostd's bound on calls in flight (--max-calls, --max-calls-per-caller):
// attacks by a member of a root daemon's socket group, against the built binaries.
//
// Tests marked DEFECT failed on the code under review (3edad34): each showed a way around the
// bound, fixed since (every control request that names a workspace or runs a program for its peer
// takes the peer's place first). The others passed there too: what held.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// curlAs posts body (GET when empty) to the control API's path as u, with curl's extra arguments
// (a --max-time, a parallel batch); unlike rawAs, curl's failure (a timeout it was told to take)
// does not fail the test.
func (d *daemonProc) curlAs(u fixture.TestUser, path, body string, extra ...string) (string, error) {
	args := append([]string{"-sS", "--unix-socket", d.socket}, extra...)
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "--data-binary", body)
	}
	cmd := exec.Command("curl", append(args, "http://clihostd"+path)...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: groupsOf(u)}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// peak samples count every 20 ms until stop is closed and returns the highest value seen.
func peak(count func() int, stop <-chan struct{}) <-chan int {
	res := make(chan int, 1)
	go func() {
		best := 0
		for {
			if n := count(); n > best {
				best = n
			}
			select {
			case <-stop:
				res <- best
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return res
}

// sleepersOfArg counts every process on the host, whoever it runs as, whose command line is
// "sleep arg".
func sleepersOfArg(arg string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); string(b) == "sleep\x00"+arg+"\x00" {
			n++
		}
	}
	return n
}

// threadsOf returns how many threads process pid has, and how many of them wait in the kernel on
// a FUSE file system (a fuse_ function in their kernel stack).
func threadsOf(t *testing.T, pid int) (all, inFUSE int) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if stack, err := os.ReadFile(dir + task.Name() + "/stack"); err == nil && strings.Contains(string(stack), "fuse_") {
			inFUSE++
		}
	}
	return len(tasks), inFUSE
}

// TestReviewLoginChecksRunOutsideTheBound (DEFECT on 3edad34). POST /v1/login runs the
// bundle's login.completes_when check in a sandbox, again every second, for up to wait_seconds
// (600 at most) — as the member, in the member's workspace — through lifecycle.Env.Run and
// runner.Run, never through host.Call: no slot is taken. With --max-calls 3
// --max-calls-per-caller 2 the member's six logins at once run six sandboxes at once, and
// clihost_calls_in_flight says 0. Any number of logins run that way (the same holds for setup's
// command steps, whose POST /v1/setup also runs outside host.Call). Here the check is a `sleep 6`;
// a real one is a CLI asking its server whether the login took (gh auth status, aws sts …), which
// takes as long as the server answers.
func TestReviewLoginChecksRunOutsideTheBound(t *testing.T) {
	bundles := t.TempDir()
	cli := strings.Replace(fixture.CLI("sleep", "slowlogin", "  nap: ./tools/nap/TOOL.md\n"), "sandbox:\n",
		`auth:
  login: { cmd: "sleep 0", completes_when: { cmd: "sleep 6", exit_code: 0 } }
sandbox:
`, 1)
	fixture.WriteIn(t, bundles, napBundle("slowlogin", cli))
	d := rootDaemon(t, "--bundles", bundles, "--max-calls", "3", "--max-calls-per-caller", "2")
	member, own := memberProject(t)

	stop := make(chan struct{})
	most := peak(func() int { return len(sleepersOf(member.UID)) }, stop)
	var inFlightSeen atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			out, err := d.curlAs(member, "/v1/login", `{"bundle": "slowlogin", "workspace": "`+own+`", "wait_seconds": 20}`, "--max-time", "30")
			if err != nil || !strings.Contains(out, "authed") {
				t.Logf("the member's login: %v %s", err, out)
			}
		})
	}
	waitUntil(t, 20*time.Second, "the member's login checks run", func() bool { return len(sleepersOf(member.UID)) > 0 })
	time.Sleep(time.Second)
	inFlightSeen.Store(int64(inFlightMetric(t, d)))
	wg.Wait()
	close(stop)
	if n := <-most; n > 2 {
		t.Errorf("the member ran %d sandboxes at once through POST /v1/login (clihost_calls_in_flight %d meanwhile); "+
			"its bound is 2 and the host's 3: login checks take no slot", n, inFlightSeen.Load())
	}
}

// TestReviewStatusVersionChecksRunOutsideTheBound (DEFECT on 3edad34). A bundle whose
// version check does not pass (the installed CLI was upgraded past the bundle's range, or its
// --version prints what version_check.parse does not match) is checked again on every use: the
// gate remembers passed checks only. GET /v1/status (also GET /v1/login and POST /v1/setup, through
// LifecycleEnv) runs that check in a sandbox, outside host.Call, so no slot is taken: a member's
// six status requests at once run six sandboxes at once, past --max-calls 3, as the daemon's own
// sandbox identity (no caller counted at all). The check here takes 4 s (a slow --version: a JVM
// or Python CLI; gcloud takes seconds).
func TestReviewStatusVersionChecksRunOutsideTheBound(t *testing.T) {
	bundles := t.TempDir()
	cli := strings.Replace(fixture.CLI("sleep", "slowver", "  nap: ./tools/nap/TOOL.md\n"),
		`version_check: { cmd: "sleep --version", parse: 'sleep \(GNU coreutils\) (\d+\.\d+)', range: ">=8" }`,
		`version_check: { cmd: "sleep 4", parse: 'slowver (\d+\.\d+)', range: ">=1" }`, 1)
	if !strings.Contains(cli, "sleep 4") {
		t.Fatal("the fixture's version_check changed")
	}
	fixture.WriteIn(t, bundles, napBundle("slowver", cli))
	d := rootDaemon(t, "--bundles", bundles, "--max-calls", "3", "--max-calls-per-caller", "2")
	member := fixture.User(t, memberName, sockGroup, shareGroup)
	// The daemon's own check after start (warm) ends first.
	waitUntil(t, 20*time.Second, "the daemon's own version checks end", func() bool { return sleepersOfArg("4") == 0 })

	stop := make(chan struct{})
	most := peak(func() int { return sleepersOfArg("4") }, stop)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			out, err := d.curlAs(member, "/v1/status?bundle=slowver", "", "--max-time", "30")
			if err != nil || !strings.Contains(out, "version_mismatch") {
				t.Logf("the member's status: %v %s", err, out)
			}
		})
	}
	wg.Wait()
	close(stop)
	if n := <-most; n > 3 {
		t.Errorf("a member's status requests ran %d version-check sandboxes at once; the host's bound is 3: "+
			"version checks outside a call take no slot", n)
	}
}

// TestReviewAStalledWorkspaceTakesDaemonThreads (DEFECT on 3edad34). The daemon resolves
// and checks a control call's workspace (Engine.workspaceFor: filepath.EvalSymlinks, stat,
// access.CheckDir) before host.Call takes a slot. A workspace on a file system that does not
// answer (a FUSE file system mounted allow_other — possible for any user where
// /etc/fuse.conf has user_allow_other —, a hard NFS mount whose server is gone) blocks the
// handler's thread in the kernel for good: the client's timeout or death does not free it (the
// request's context is not looked at in a system call), nothing counts it, and the member can send
// as many as it likes. Each one is an OS thread of the daemon: the Go runtime aborts the whole
// daemon at 10 000 (fatal error: thread exhaustion), every user's calls with it. Here 60 requests
// of one member (one curl process, its connections closed after 3 s) leave 60 more daemon threads
// blocked, with --max-calls 3, and clihost_calls_in_flight 0.
func TestReviewAStalledWorkspaceTakesDaemonThreads(t *testing.T) {
	fixture.Slow(t)
	t.Setenv("TMPDIR", "/var/tmp") // not under /tmp, which a sandbox replaces
	d := rootDaemon(t, "--max-calls", "3", "--max-calls-per-caller", "2")
	member := fixture.User(t, memberName, sockGroup, shareGroup)
	// After the daemon, so that its cleanup (answering every request) runs before the daemon's.
	srv, mnt := fixture.HostileFUSEServer(t, func(_, pid uint32) bool { return commOf(pid) == "clihostd" })
	pid := d.cmd.Process.Pid
	before, _ := threadsOf(t, pid)

	urls := "http://clihostd/v1/call?n=[1-60]"
	body := `{"bundle": "id", "tool": "who", "input": {}, "workspace": "` + filepath.Join(mnt, "d") + `"}`
	cmd := exec.Command("curl", "-sS", "--unix-socket", d.socket, "-Z", "--parallel-immediate", "--parallel-max", "60", "--max-time", "3",
		"-H", "Content-Type: application/json", "--data-binary", body, urls)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(member.UID), Gid: uint32(member.GID), Groups: groupsOf(member)}}
	out, _ := cmd.CombinedOutput() // every request times out
	if len(srv.Held()) == 0 {
		t.Fatalf("the daemon never asked the stalled file system: the attack did not happen\n%s", out)
	}
	time.Sleep(500 * time.Millisecond)
	after, blocked := threadsOf(t, pid)
	if os.Getenv("REVIEW_DEBUG") != "" {
		t.Logf("curl: %s", out)
	}
	inFlight := inFlightMetric(t, d)
	t.Logf("daemon threads: %d before, %d after the member's 60 requests (their clients gone), %d of them blocked on the stalled file system; %d requests held; clihost_calls_in_flight %d",
		before, after, blocked, len(srv.Held()), inFlight)
	if blocked == 0 {
		t.Fatal("no daemon thread is seen blocked on the file system that holds its requests: the count is blind")
	}
	// Counted in the kernel, not as the threads' number: the Go runtime keeps the threads it
	// started while the burst's other requests were answered, idle.
	if blocked > 3 {
		t.Errorf("one member's requests left %d daemon threads blocked after its clients went away (--max-calls 3, "+
			"clihost_calls_in_flight %d): a control request's host-side work before its slot is unbounded", blocked, inFlight)
	}
	// The other users still get answers meanwhile (the daemon lives), until the threads run out.
	if env := parseEnvelope(t, d.ctl(t, "call", "id", "who", "--workspace", d.ws)); !env.OK {
		t.Errorf("root's call while the member's requests are stuck: %+v", env.Error)
	}
	srv.Release()
}

// TestReviewAKilledClientsCallGivesItsPlaceBackOnlyWithItsSandbox (held). The member's clihostctl
// is SIGKILLed mid-call: the daemon sees its connection close, ends the call's sandbox and gives
// its place back — not before the sandbox's processes are gone (while the member's sleep lives,
// clihost_calls_in_flight stays 1), and for good (its next call runs; no slot leaks).
func TestReviewAKilledClientsCallGivesItsPlaceBackOnlyWithItsSandbox(t *testing.T) {
	bundles := t.TempDir()
	fixture.WriteIn(t, bundles, fixture.Sleep(60_000))
	d := rootDaemon(t, "--bundles", bundles, "--max-calls-per-caller", "1")
	member, own := memberProject(t)

	for round := range 3 {
		cmd := exec.Command(bin.ctl, "--socket", d.socket, "call", "sleep", "nap", "--workspace", own, "--input", `{"s": "30"}`)
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=" + systemPath, "HOME=" + member.Home, "CLIHOST_BUNDLES="}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(member.UID), Gid: uint32(member.GID), Groups: groupsOf(member)}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 20*time.Second, "the member's sleep runs", func() bool { return len(sleepersOf(member.UID)) == 1 })
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		// Until the place is back, the sandbox must be gone first: never a free place while it lives.
		waitUntil(t, 20*time.Second, "the member's place is back after its client was killed", func() bool {
			n := inFlightMetric(t, d) // first: a sleep seen after a 0 outlived the call's place
			live := sleepersOf(member.UID)
			if n == 0 && len(live) > 0 {
				t.Fatalf("round %d: clihost_calls_in_flight 0 while the killed call's sleep %v still runs", round, live)
			}
			return n == 0
		})
		if n := len(sleepersOf(member.UID)); n != 0 {
			t.Fatalf("round %d: %d of the member's sleeps outlived its killed call", round, n)
		}
	}
	if env := parseEnvelope(t, d.ctlAs(t, member, "call", "sleep", "nap", "--workspace", own, "--input", `{"s": "0"}`)); !env.OK {
		t.Fatalf("the member's call after three killed clients: %+v (a slot leaked?)", env.Error)
	}
}

// TestReviewAMemberIsOneCallerWhateverItSends (held). What a member controls in a request — its
// workspace (its own, one it reaches through a group, "" for the daemon's), its bundle, a
// timeout_ms — does not make it another caller: with --max-calls-per-caller 2 a member's third
// call is refused however it is dressed, and it cannot read the MCP token to be counted as the
// agent too. Root's call still runs.
func TestReviewAMemberIsOneCallerWhateverItSends(t *testing.T) {
	bundles := t.TempDir()
	fixture.WriteIn(t, bundles, fixture.Sleep(30_000))
	d := rootDaemon(t, "--bundles", bundles, "--max-calls", "10", "--max-calls-per-caller", "2")
	member, own := memberProject(t)
	other := filepath.Join(member.Home, "other")
	privateDir(t, other, member.UID, member.GID, 0o700)

	if out, _ := d.curlAs(member, "/v1/token", ""); strings.Contains(out, `"token"`) && !strings.Contains(out, "only root") {
		t.Fatalf("the member read the MCP token: %s", out)
	}
	var wg sync.WaitGroup
	for _, ws := range []string{own, other} {
		wg.Go(func() {
			_, _ = d.curlAs(member, "/v1/call", `{"bundle": "sleep", "tool": "nap", "input": {"s": "6"}, "workspace": "`+ws+`"}`, "--max-time", "20")
		})
	}
	waitUntil(t, 20*time.Second, "the member's two sleeps run", func() bool { return len(sleepersOf(member.UID)) == 2 })
	for _, req := range []string{
		`{"bundle": "sleep", "tool": "nap", "input": {"s": "0"}, "workspace": "` + own + `/."}`,
		`{"bundle": "sleep@1", "tool": "sleep.nap", "input": {"s": "0"}, "workspace": "` + other + `", "timeout_ms": 1000}`,
		`{"bundle": "id", "tool": "who", "input": {}, "workspace": "` + own + `"}`,
	} {
		out, err := d.curlAs(member, "/v1/call", req, "--max-time", "20")
		if err != nil || !strings.Contains(out, "rate_limited") {
			t.Errorf("the member's third call %s: %v %s, want rate_limited", req, err, out)
		}
	}
	if env := parseEnvelope(t, d.ctl(t, "call", "sleep", "nap", "--workspace", d.ws, "--input", `{"s": "0"}`)); !env.OK {
		t.Errorf("root's call beside the member's two: %+v", env.Error)
	}
	wg.Wait()
}

// napBundle is the bundle id of CLI.md cli (a sleep bundle's, changed) with its tool nap, which
// sleeps for input s seconds.
func napBundle(id, cli string) map[string]string {
	return map[string]string{
		id + "/CLI.md": cli,
		id + "/tools/nap/TOOL.md": `---
name: Nap
id: ` + id + `.nap
description: Sleeps.
version: 1.0.0
inputs: { type: object, properties: { s: { type: string } }, required: [s] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["${input.s}"] }
---
`,
	}
}
