package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// daemonSelfBin is a copy of the built clihostd in a folder of its own, without the
// clihost-sandbox helper beside it: it starts every sandbox by re-executing itself, as a daemon
// started with `go run ./cmd/clihostd` does.
var daemonSelfBin = sync.OnceValues(func() (string, error) {
	src, err := daemonBin()
	if err != nil {
		return "", err
	}
	return copyAlone(src)
})

// copyAlone copies the executable at src into a new folder of its own beside src's (reachable,
// as an installed daemon's is) and returns the copy's path.
func copyAlone(src string) (string, error) {
	dir := filepath.Join(filepath.Dir(src), "self")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("copy clihostd: %w", err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("copy clihostd: %w", err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		return "", fmt.Errorf("copy clihostd: %w", err)
	}
	return dst, nil
}

// mcpProtocol is the MCP revision the benchmark's raw client speaks.
const mcpProtocol = "2025-11-25"

// runningDaemon is a clihostd a benchmark started, serving the `true` fixture bundle over MCP.
type runningDaemon struct {
	proc  *fixture.Proc
	log   *fixture.Lines
	url   string // http://127.0.0.1:PORT/mcp/true
	token string
	self  bool // it said at start that it has no helper and re-executes itself for each sandbox
}

// cpuProfileEnv, when set to a file name, makes startDaemon run clihostd with --cpuprofile
// FILE.N (N counting the daemons the test binary started): the daemon's own profile of a
// benchmark, written when the daemon stops at the benchmark's end.
const cpuProfileEnv = "CLIHOST_BENCH_DAEMON_CPUPROFILE"

// memProfileEnv is cpuProfileEnv for clihostd's --memprofile (its allocation profile).
const memProfileEnv = "CLIHOST_BENCH_DAEMON_MEMPROFILE"

// daemonCount numbers the daemons startDaemon started, for their profiles' names.
var daemonCount int

// startDaemon starts the clihostd at exe as an operator would run it: a private state
// directory, control socket and loopback port, only a bundle folder holding the `true` fixture
// bundle (no built-in catalog), no approval policy, a workspace owned by the agent user. It
// returns once the daemon said it is ready, and stops it (SIGTERM, then waits) when b ends. extra
// are more clihostd flags.
func startDaemon(b *testing.B, exe string, extra ...string) *runningDaemon {
	b.Helper()
	return startDaemonAs(b, false, exe, extra...)
}

// startDaemonAs is startDaemon; with unprivileged, clihostd runs as the agent user (as the shipped
// unit runs it as a user of its own), owning its state directory and the workspace, and so builds
// every sandbox in a user namespace.
func startDaemonAs(b *testing.B, unprivileged bool, exe string, extra ...string) *runningDaemon {
	b.Helper()
	if err := nsinit.Check(); err != nil {
		missing(b, "the kernel sandbox is unavailable: %v", err)
	}
	if os.Geteuid() != 0 {
		missing(b, "the daemon benchmarks run as root (as CI does)")
	}
	state := b.TempDir()
	fixture.Reachable(b, state)
	bundles := fixture.Write(b, fixture.True())
	fixture.Reachable(b, bundles)
	args := []string{"--state", state, "--socket", filepath.Join(state, "ctl.sock"), "--http", "127.0.0.1:0",
		"--bundles", bundles, "--no-catalog", "--workspace", fixture.Workspace(b),
		"--approvals", filepath.Join(state, "approvals.yaml")}
	if unprivileged {
		fixture.GiveToAgent(b, state)
	}
	args = append(args, extra...)
	daemonCount++
	if f := os.Getenv(cpuProfileEnv); f != "" {
		args = append(args, "--cpuprofile", fmt.Sprintf("%s.%d", f, daemonCount))
	}
	if f := os.Getenv(memProfileEnv); f != "" {
		args = append(args, "--memprofile", fmt.Sprintf("%s.%d", f, daemonCount))
	}
	cmd := exec.Command(exe, args...)
	home := b.TempDir()
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home, "CLIHOST_BUNDLES="}
	if unprivileged {
		fixture.GiveToAgent(b, home)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: fixture.AgentID, Gid: fixture.AgentID}}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	d := &runningDaemon{proc: fixture.Start(b, cmd), log: fixture.Follow(stderr)}
	b.Cleanup(func() { // before fixture.Start's kill: a clean stop writes the profile
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = d.proc.Wait()
	})
	line, err := d.log.Wait("clihostd ready", time.Minute)
	if err != nil {
		b.Fatalf("clihostd %v\n%s", err, strings.Join(d.log.All(), "\n"))
	}
	for _, l := range d.log.All() { // the lines up to the ready line, the probe's included
		d.self = d.self || strings.Contains(l, "no "+nsinit.HelperName+" helper beside clihostd")
	}
	go d.log.Drain() // keep the daemon's log pipe flowing
	m := regexp.MustCompile(`mcp=(http://\S+)/mcp/`).FindStringSubmatch(line)
	if m == nil {
		b.Fatalf("no MCP URL in %q", line)
	}
	d.url = m[1] + "/mcp/true"
	tok, err := os.ReadFile(filepath.Join(state, "token"))
	if err != nil {
		b.Fatal(err)
	}
	d.token = strings.TrimSpace(string(tok))
	return d
}

// mcpClient is a raw JSON-RPC client of the daemon's streamable HTTP endpoint: each request one
// POST on a kept-alive loopback connection, with the headers the transport requires.
type mcpClient struct {
	d    *runningDaemon
	http *http.Client
	id   int
}

// newClient connects to d as an MCP client does: one initialize (and its initialized
// notification); the endpoint is stateless, so every later call stands alone.
func (d *runningDaemon) newClient(b *testing.B) *mcpClient {
	b.Helper()
	c := &mcpClient{d: d, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}}
	b.Cleanup(c.http.CloseIdleConnections)
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`, mcpProtocol)
	if out, err := c.post(init); err != nil || !bytes.Contains(out, []byte(`"serverInfo"`)) {
		b.Fatalf("initialize: %v %s", err, out)
	}
	if _, err := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		b.Fatalf("initialized: %v", err)
	}
	return c
}

// post sends one JSON-RPC message and returns the response body (an SSE stream holding the
// response, or nothing for a notification).
func (c *mcpClient) post(body string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, c.d.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.d.token)
	req.Header.Set("Mcp-Protocol-Version", mcpProtocol)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return out, err
	}
	if resp.StatusCode/100 != 2 {
		return out, fmt.Errorf("HTTP %s", resp.Status)
	}
	return out, nil
}

// call is one tools/call of the fixture's tool run (/usr/bin/true in the sandbox); it fails
// unless the result is a success.
func (c *mcpClient) call() error {
	c.id++
	out, err := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run","arguments":{}}}`, c.id))
	switch {
	case err != nil:
		return fmt.Errorf("tools/call: %w: %s", err, out)
	case !bytes.Contains(out, []byte(`"result"`)) || bytes.Contains(out, []byte(`"isError":true`)):
		return fmt.Errorf("tools/call failed: %s", out)
	}
	return nil
}

// BenchmarkPeerDaemonMCPTrue is the measure of the daemon path: one warm MCP tools/call
// over loopback HTTP (bearer token, raw JSON-RPC on a kept-alive connection) to the built
// clihostd, with the clihost-sandbox helper beside it as an install has, of the tool that runs
// /usr/bin/true in the kernel sandbox. Everything the daemon does per call is in it: HTTP, the
// token check, MCP decoding and encoding, host.Call with its sandbox, metrics and the audit line.
func BenchmarkPeerDaemonMCPTrue(b *testing.B) {
	if d := benchmarkDaemon(b, must(b, daemonBin)); d.self {
		b.Fatal("clihostd found no helper beside it")
	}
}

// BenchmarkPeerDaemonMCPTrueAfterPause is BenchmarkPeerDaemonMCPTrue with each call made after
// agentPause (the timer stopped), as an agent's calls come after its model's turn: the daemon's
// zygote has built the call's sandbox ahead. Compare BenchmarkPeerBwrapTrueAfterPause.
func BenchmarkPeerDaemonMCPTrueAfterPause(b *testing.B) {
	benchmarkDaemonPaced(b, false, agentPause, must(b, daemonBin))
}

// BenchmarkPeerDaemonMCPUnprivilegedTrueAfterPause is BenchmarkPeerDaemonMCPTrueAfterPause with
// the daemon run as an unprivileged user, as the shipped unit runs it.
func BenchmarkPeerDaemonMCPUnprivilegedTrueAfterPause(b *testing.B) {
	benchmarkDaemonPaced(b, true, agentPause, must(b, daemonBin))
}

// BenchmarkPeerDaemonMCPSelfTrue is BenchmarkPeerDaemonMCPTrue with a clihostd that has no helper
// beside it and so re-executes itself for every sandbox (what `go run ./cmd/clihostd` gives).
func BenchmarkPeerDaemonMCPSelfTrue(b *testing.B) {
	if d := benchmarkDaemon(b, must(b, daemonSelfBin)); !d.self {
		b.Fatal("clihostd did not say it re-executes itself for each sandbox")
	}
}

// BenchmarkPeerDaemonMCPUnsandboxedTrue is BenchmarkPeerDaemonMCPTrue with clihostd
// --sandbox=off: against BenchmarkPeerClihostUnsandboxedTrue (the same call in process, no
// sandbox) it isolates what the daemon path itself adds (HTTP, the token, MCP, the daemon's
// audit, metrics and state look-ups).
func BenchmarkPeerDaemonMCPUnsandboxedTrue(b *testing.B) {
	benchmarkDaemon(b, must(b, daemonBin), "--sandbox", "off")
}

// BenchmarkPeerDaemonMCPUnprivilegedTrue is BenchmarkPeerDaemonMCPTrue with clihostd run as an
// unprivileged user (the agent user), as the shipped unit runs it as its own (User=clihost): every
// sandbox is built in a user namespace, the zygote's.
func BenchmarkPeerDaemonMCPUnprivilegedTrue(b *testing.B) {
	benchmarkDaemonAs(b, true, must(b, daemonBin))
}

// benchmarkDaemon times warm tools/call requests to the clihostd at exe (started with the extra
// flags) and returns it.
func benchmarkDaemon(b *testing.B, exe string, extra ...string) *runningDaemon {
	return benchmarkDaemonAs(b, false, exe, extra...)
}

// benchmarkDaemonAs is benchmarkDaemon of a daemon startDaemonAs started.
func benchmarkDaemonAs(b *testing.B, unprivileged bool, exe string, extra ...string) *runningDaemon {
	return benchmarkDaemonPaced(b, unprivileged, 0, exe, extra...)
}

// benchmarkDaemonPaced is benchmarkDaemonAs with each call made after pause (none when 0).
func benchmarkDaemonPaced(b *testing.B, unprivileged bool, pause time.Duration, exe string, extra ...string) *runningDaemon {
	d := startDaemonAs(b, unprivileged, exe, extra...)
	c := d.newClient(b)
	if err := c.call(); err != nil { // the version check, once
		b.Fatal(err)
	}
	cpu0 := d.cpuTime(b)
	loop(b, pause, func() {
		if err := c.call(); err != nil {
			b.Fatal(err)
		}
	})
	b.StopTimer()
	b.ReportMetric((d.cpuTime(b)-cpu0).Seconds()*1000/float64(max(b.N, 1)), "daemon-cpu-ms/op")
	if takes := d.poolTakes(b); len(takes) > 0 {
		calls := max(takes["zygote"]+takes["hit"]+takes["miss"], 1)
		b.ReportMetric(takes["zygote"]/calls, "zygote/call")
		b.ReportMetric(takes["reused"]/calls, "groups-reused/call")
		if pause > 0 {
			b.ReportMetric(takes["ahead"]/calls, "ahead/call")
		}
	}
	return d
}

// cpuTime is the CPU time the daemon process itself has used so far (user and system, all its
// threads; not its children's, the sandboxes'), from /proc/PID/stat. It counts in the kernel's
// ticks (10 ms), so daemon-cpu-ms/op means something over hundreds of calls, not a few.
func (d *runningDaemon) cpuTime(b *testing.B) time.Duration {
	b.Helper()
	pid := d.proc.Cmd.Process.Pid
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's "(name)" start with the 3rd, state: utime is the 14th, stime the 15th.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, stat)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times (100 on every Linux ABI Go
// supports).
const clockTicks = 100

// poolTakes reads the daemon's clihost_sandbox_pool_takes_total counters from /metrics, by
// result (zygote, hit, miss), and its calls built ahead (ahead) and given a kept control group
// (reused); none when the daemon has no pool.
func (d *runningDaemon) poolTakes(b *testing.B) map[string]float64 {
	b.Helper()
	page := fixture.Metrics(b, strings.TrimSuffix(d.url, "/mcp/true"), d.token)
	takes := map[string]float64{}
	for _, result := range []string{"zygote", "hit", "miss"} {
		if n, ok := fixture.MetricValue(page, `clihost_sandbox_pool_takes_total{result="`+result+`"}`); ok {
			takes[result] = n
		}
	}
	if n, ok := fixture.MetricValue(page, "clihost_sandbox_zygote_ahead_total"); ok {
		takes["ahead"] = n
	}
	if n, ok := fixture.MetricValue(page, "clihost_sandbox_cgroups_reused_total"); ok {
		takes["reused"] = n
	}
	return takes
}
