package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// lingerBundle writes a bundle "linger" whose tool run runs `bash -c SCRIPT` in the sandbox, with the
// given timeout, able to spawn sleep, setsid and sh.
func lingerBundle(t *testing.T, timeoutMS int) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "linger", "CLI.md"), `---
name: Linger
id: linger
description: Runs a bash script in the sandbox; for the sandbox lifetime tests.
version: 1.0.0
bin: bash
install: [{ method: apt, package: bash }]
version_check: { cmd: "bash --version", parse: 'GNU bash, version (\d+\.\d+)', range: ">=4" }
sandbox:
  network: { egress: [] }
  fs: { read: [], write: [] }
  exec: { allow: true, spawn: [sleep, setsid, sh] }
  env: { pass: [] }
commands:
  run: ./tools/run/TOOL.md
---
`)
	writeFile(t, filepath.Join(dir, "linger", "tools", "run", "TOOL.md"), fmt.Sprintf(`---
name: Run
id: linger.run
description: Runs a bash script.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { script: { type: string } }, required: [script] }
outputs: { type: string }
timeout_ms: %d
runner: { cli: ../../CLI.md, argv: ["-c", "${input.script}"] }
---
`, timeoutMS))
	return dir
}

// sleepToken returns a sleep duration no other process on this machine uses (about 1000 seconds,
// with random decimals), so that the processes of one test are found by their command line.
func sleepToken(t *testing.T) string {
	t.Helper()
	n, err := rand.Int(rand.Reader, big.NewInt(1e9))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("1000.%09d", n.Int64())
}

// lingerScript is a program that outlives whatever asks it to stop: it ignores SIGTERM (and so does
// everything it starts), starts a child in a session of its own that double-forks a sleeper, and
// sleeps itself. Every sleeper sleeps token seconds.
func lingerScript(token string) string {
	return fmt.Sprintf("trap '' TERM; setsid sh -c '(sleep %[1]s &); sleep %[1]s' & sleep %[1]s; wait", token)
}

// proc is a process found in /proc.
type proc struct {
	pid, ppid int
	cmdline   string // arguments joined by spaces
}

// processes lists the live processes running "sleep token".
func processes(token string) []proc {
	entries, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := readProc(pid)
		if ok && p.cmdline == "sleep "+token {
			out = append(out, p)
		}
	}
	return out
}

// readProc reads pid's command line and parent; false when it is gone or a zombie.
func readProc(pid int) (proc, bool) {
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmd) == 0 {
		return proc{}, false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc{}, false
	}
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 || f[0] == "Z" {
		return proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return proc{pid: pid, ppid: ppid, cmdline: strings.Join(strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00"), " ")}, true
}

// isInit reports whether p is a sandbox's init.
func isInit(p proc) bool {
	return strings.HasPrefix(p.cmdline, "clihost-sandbox __clihost_init")
}

// isZygote reports whether p is the zygote (or a PID 1 it forked, which carries its command line).
// The zygote's thread is the parent of a program it started; it outlives the call.
func isZygote(p proc) bool {
	return strings.HasPrefix(p.cmdline, "clihost-sandbox __clihost_zygote")
}

// requireNoInitsOf fails t when, after within, a sandbox init of the daemon on state is still
// running: one serving a call, or one its pool kept ready.
func requireNoInitsOf(t *testing.T, state string, within time.Duration) {
	t.Helper()
	var left []proc
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if left = initsOf(t, state); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Fatalf("sandbox inits of the daemon on %s still run: %+v", state, left)
	}
}

// initsOf lists the sandbox inits of the daemon on state, its zygote and the zygote's PID 1s: their
// command line carries its owner tag, "clihostd-" and 16 hex digits of the SHA-256 of the state
// directory.
func initsOf(t *testing.T, state string) []proc {
	t.Helper()
	abs, err := filepath.Abs(state)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(abs))
	tag := "clihostd-" + hex.EncodeToString(sum[:8])
	want := []string{"clihost-sandbox __clihost_init " + tag, "clihost-sandbox __clihost_zygote " + tag}
	var out []proc
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if p, ok := readProc(pid); ok && slices.Contains(want, p.cmdline) {
				out = append(out, p)
			}
		}
	}
	return out
}

// callTree is what a test saw of its calls while they ran: the sleepers and their sandboxes' inits.
type callTree struct {
	token string
	procs map[int]proc // pid → what it was
}

// waitCalls waits until n sleepers with token run, and records them and their ancestors up to
// their sandboxes' inits.
// A timeout reports those of calls that ended meanwhile: a call that failed starts no sleeper.
func waitCalls(t *testing.T, token string, n int, calls ...*bgCalls) *callTree {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		sleepers := processes(token)
		if len(sleepers) >= n {
			ct := &callTree{token: token, procs: map[int]proc{}}
			for _, p := range sleepers {
				ct.procs[p.pid] = p
				for q, ok := readProc(p.ppid); ok && q.pid > 1 && !isZygote(q); q, ok = readProc(q.ppid) {
					ct.procs[q.pid] = q
					if isInit(q) {
						break
					}
				}
			}
			for _, p := range ct.procs {
				if !isInit(p) && p.cmdline != "sleep "+token && !strings.HasPrefix(p.cmdline, "bash -c ") && !strings.HasPrefix(p.cmdline, "sh -c ") {
					t.Fatalf("a sleeper's ancestor below its sandbox's init is %+v", p)
				}
			}
			return ct
		}
		if time.Now().After(deadline) {
			var ended []result
			for _, c := range calls {
				ended = append(ended, c.ended()...)
			}
			t.Fatalf("%d of %d sleepers started; calls ended meanwhile: %+v", len(sleepers), n, ended)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// survivors returns the recorded processes still alive (same pid, same command line) and any new
// process sleeping the token.
func (ct *callTree) survivors() []proc {
	var out []proc
	for pid, was := range ct.procs {
		if now, ok := readProc(pid); ok && now.cmdline == was.cmdline {
			out = append(out, now)
		}
	}
	for _, p := range processes(ct.token) {
		if _, seen := ct.procs[p.pid]; !seen {
			out = append(out, p)
		}
	}
	return out
}

// requireNoSurvivors polls for at most within until no process of the calls is left, and fails
// the test naming those that are. Survivors are killed afterwards, so that a failure leaves
// nothing behind.
func (ct *callTree) requireNoSurvivors(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := ct.survivors()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range left {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
			t.Fatalf("%d processes of the calls survive %v later, e.g. %+v", len(left), within, left[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killOnCleanup makes sure nothing sleeping token outlives the test, whatever happened.
func killOnCleanup(t *testing.T, token string) {
	t.Cleanup(func() {
		for _, p := range processes(token) {
			for q, ok := readProc(p.ppid); ok && q.pid > 1; q, ok = readProc(q.ppid) {
				if isInit(q) {
					_ = syscall.Kill(q.pid, syscall.SIGKILL)
				}
			}
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	})
}

// startLingering starts clihostd with the linger bundle (timeout timeoutMS) and calls of
// lingerScript in a fresh workspace, with a fresh token (killed at cleanup), and waits until the
// 3 processes of each call run.
func startLingering(t *testing.T, timeoutMS, calls int) (*daemonProc, func() []result, *callTree) {
	t.Helper()
	token := sleepToken(t)
	killOnCleanup(t, token)
	d := startDaemon(t, t.TempDir(), "--bundles", lingerBundle(t, timeoutMS), "--max-calls-per-caller", strconv.Itoa(calls))
	bg := startCalls(t, d, fixture.Workspace(t), calls, lingerScript(token))
	return d, bg.wait, waitCalls(t, token, 3*calls, bg)
}

// bgCalls are clihostctl calls running in the background (startCalls).
type bgCalls struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	done []result // in the order they ended
}

// wait waits for every call and returns their results.
func (b *bgCalls) wait() []result {
	b.wg.Wait()
	return b.ended()
}

// ended returns the results of the calls that have ended.
func (b *bgCalls) ended() []result {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.done)
}

// startCalls starts n `clihostctl call linger run` with script, in the background.
func startCalls(t *testing.T, d *daemonProc, ws string, n int, script string) *bgCalls {
	t.Helper()
	input := fmt.Sprintf(`{"script": %q}`, script)
	bg := &bgCalls{}
	for range n {
		bg.wg.Go(func() {
			cmd := exec.Command(bin.ctl, "--socket", d.socket, "call", "linger", "run", "--workspace", ws, "--input", input)
			o, err := fixture.Run(cmd)
			if err != nil {
				o.Code = -1
			}
			bg.mu.Lock()
			bg.done = append(bg.done, result{o.Code, o.Stdout, o.Stderr})
			bg.mu.Unlock()
		})
	}
	return bg
}

// mcpResult is how an MCP tool call ended.
type mcpResult struct {
	err     error
	IsError bool
	text    string
}

// startMCPCall calls linger's tool with script over MCP streamable HTTP, with the daemon's token,
// in the background; the result arrives on the channel.
func startMCPCall(t *testing.T, d *daemonProc, script string) <-chan mcpResult {
	t.Helper()
	var tok struct{ Token string }
	if r := d.ctl(t, "token", "--json"); json.Unmarshal([]byte(r.stdout), &tok) != nil || tok.Token == "" {
		t.Fatalf("token: %+v", r)
	}
	ctx := context.Background()
	c, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: d.mcp + "/mcp/linger", HTTPClient: &http.Client{Transport: bearer{tok.Token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	list, err := c.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 1 {
		t.Fatalf("tools: %v %v", list, err)
	}
	out := make(chan mcpResult, 1)
	go func() {
		res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: list.Tools[0].Name, Arguments: map[string]any{"script": script}})
		if err != nil {
			out <- mcpResult{err: err}
			return
		}
		r := mcpResult{IsError: res.IsError}
		if len(res.Content) > 0 {
			if txt, ok := res.Content[0].(*sdk.TextContent); ok {
				r.text = txt.Text
			}
		}
		out <- r
	}()
	return out
}

// requireSandbox skips the test when this host cannot build the sandbox (it fails under CI=true).
func requireSandbox(t *testing.T) {
	t.Helper()
	fixture.Need(t, "bash", "sleep", "setsid")
	fixture.NeedRoot(t)
	fixture.NeedSandbox(t, nsinit.Check())
}

// TestNoSandboxOutlivesKill9 SIGKILLs clihostd while 20 calls run programs that ignore SIGTERM and
// leave a setsid'd, double-forked sleeper behind: within a second nothing of any call is left
// (sandbox inits, programs, escaped sleepers).
func TestNoSandboxOutlivesKill9(t *testing.T) {
	requireSandbox(t)
	d, wait, ct := startLingering(t, 600_000, 20)
	if n := len(initsOf(t, d.state)); n < 20 {
		t.Fatalf("%d sandbox inits of the daemon found, want its 20 calls' and its pool's", n)
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = d.proc.Wait()
	ct.requireNoSurvivors(t, time.Second)
	requireNoInitsOf(t, d.state, time.Second) // the inits its pool kept ready too
	for _, r := range wait() {
		if r.code == 0 {
			t.Fatalf("a call succeeded although its daemon was killed: %+v", r)
		}
	}
}

// TestSIGTERMDrainsThenStopsCalls sends SIGTERM to clihostd while calls run (over the control
// socket and over MCP): it stops accepting connections, lets a call that ends within
// --drain-timeout finish with its result, then cancels the rest (they end in the cancelled error)
// and exits within the drain deadline plus the sandbox's grace, leaving nothing behind.
func TestSIGTERMDrainsThenStopsCalls(t *testing.T) {
	requireSandbox(t)
	const calls = 5
	token := sleepToken(t)
	killOnCleanup(t, token)
	drain := 3 * time.Second
	d := startDaemon(t, t.TempDir(), "--bundles", lingerBundle(t, 600_000), "--drain-timeout", drain.String())
	ws := fixture.Workspace(t)
	long := startCalls(t, d, ws, calls, lingerScript(token))
	shortToken := sleepToken(t)
	killOnCleanup(t, shortToken)
	short := startCalls(t, d, ws, 1, fmt.Sprintf("sleep %s & sleep 1; echo done", shortToken))
	mcpResult := startMCPCall(t, d, lingerScript(token))
	ct := waitCalls(t, token, 3*(calls+1), long)
	waitCalls(t, shortToken, 1, short)
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, "clihostd stopping")
	refused := time.Now().Add(drain)
	for {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(refused) {
			t.Fatal("the control socket still accepts connections while the daemon drains")
		}
		time.Sleep(10 * time.Millisecond)
	}
	exited := make(chan error, 1)
	go func() { exited <- d.proc.Wait() }()
	// The drain deadline, the runner's grace between SIGTERM and SIGKILL, and a margin.
	bound := drain + 2*time.Second + 5*time.Second
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("clihostd exit: %v", err)
		}
	case <-time.After(bound):
		t.Fatalf("clihostd still runs %v after SIGTERM with --drain-timeout %v", bound, drain)
	}
	ct.requireNoSurvivors(t, time.Second)
	requireNoInitsOf(t, d.state, time.Second)
	shortEnd := short.wait()[0]
	if shortEnd.code != 0 || !strings.Contains(shortEnd.stdout, `"value": "done\n"`) {
		t.Fatalf("the call that ended within the drain deadline: %+v", shortEnd)
	}
	// Over MCP a cancelled request gets no response (the SDK drops it): the call ends in an error.
	if res := <-mcpResult; res.err == nil && (!res.IsError || !strings.Contains(res.text, `"code": "cancelled"`)) {
		t.Fatalf("the MCP call that outlived the drain deadline: %+v", res)
	}
	for _, r := range long.wait() {
		if e := decodeEnvelope(t, r); e.OK || e.Error == nil || e.Error.Code != "cancelled" {
			t.Fatalf("a call that outlived the drain deadline: exit %d %+v, want the cancelled error", r.code, e)
		}
	}
}

// TestTimeoutKillsEscapedProcesses runs a call with a 1 s timeout whose program ignores SIGTERM and
// leaves a setsid'd, double-forked sleeper behind: the call times out and nothing of it is left.
func TestTimeoutKillsEscapedProcesses(t *testing.T) {
	requireSandbox(t)
	_, wait, ct := startLingering(t, 1000, 1)
	r := wait()[0]
	if e := decodeEnvelope(t, r); e.OK || e.Error == nil || e.Error.Code != "timeout" {
		t.Fatalf("want a timeout: exit %d %+v\n%s", r.code, e, r.stderr)
	}
	ct.requireNoSurvivors(t, time.Second)
}

// fakeInit starts bash running a script that sleeps token seconds, with the command line of a
// sandbox init tagged owner ("clihost-sandbox __clihost_init OWNER"), as a daemon's leftover.
func fakeInit(t *testing.T, owner, token string) *fixture.Proc {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "__clihost_init"), "sleep "+token+"\n")
	return fixture.Start(t, &exec.Cmd{Path: "/bin/bash", Args: []string{"clihost-sandbox", "__clihost_init", owner}, Dir: dir})
}

// TestRestartReapsLeftovers starts clihostd on a state directory whose previous daemon left a
// sandbox init running: the new daemon kills it, and leaves alone an init tagged for another
// state directory.
func TestRestartReapsLeftovers(t *testing.T) {
	requireSandbox(t)
	state, elsewhere := t.TempDir(), t.TempDir()
	tag := func(dir string) string {
		sum := sha256.Sum256([]byte(dir))
		return "clihostd-" + hex.EncodeToString(sum[:8])
	}
	mine, other := sleepToken(t), sleepToken(t)
	killOnCleanup(t, mine)
	killOnCleanup(t, other)
	left := fakeInit(t, tag(state), mine)
	kept := fakeInit(t, tag(elsewhere), other)
	// A fake's sleeper is not in a PID namespace: it outlives its bash, and killOnCleanup ends it.
	waitCalls(t, mine, 1)
	waitCalls(t, other, 1)
	exited := make(chan struct{})
	go func() { _ = left.Wait(); close(exited) }()
	startDaemon(t, state)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the leftover init still runs after the daemon started")
	}
	if ws := left.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the leftover init ended with %v, want SIGKILL", left.Cmd.ProcessState)
	}
	if _, alive := readProc(kept.Cmd.Process.Pid); !alive {
		t.Fatal("the init of another state directory was killed")
	}
}

// TestSandboxEndsAtItsDeadlineWhenTheDaemonIsStuck SIGSTOPs clihostd while a call with a 1 s
// timeout runs: the daemon can neither time the call out nor die, so only the sandbox's own
// deadline (timeout + 2 s grace + 2 s margin) can end it, and nothing of the call is left soon
// after.
func TestSandboxEndsAtItsDeadlineWhenTheDaemonIsStuck(t *testing.T) {
	requireSandbox(t)
	d, wait, ct := startLingering(t, 1000, 1)
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = d.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	// The deadline is at most 5 s after the call started; a margin for a loaded machine.
	ct.requireNoSurvivors(t, 8*time.Second)
	resume()
	if r := wait()[0]; r.code == 0 {
		t.Fatalf("the call succeeded: %+v", r)
	}
}
