package tests

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/internal/fixture"
)

// TestDaemonCheck runs `clihostd -check`: the embedded catalog loads; a broken bundle is refused.
func TestDaemonCheck(t *testing.T) {
	r := runBin(t, bin.daemon, t.TempDir(), "-check")
	if r.code != 0 || strings.Count(r.stderr, "bundle loaded") != 16 || strings.Contains(r.stderr, "refused") {
		t.Fatalf("embedded catalog: exit %d\n%s", r.code, r.stderr)
	}
	r = runBin(t, bin.daemon, "", "-check", "-bundles", "testdata/spec-example", "-bundles", "testdata/unseen")
	if r.code != 1 || !strings.Contains(r.stderr, `msg="bundle refused" bundle=gh@1`) || !strings.Contains(r.stderr, `msg="bundle loaded" bundle=stripe@2`) {
		t.Fatalf("spec example: exit %d\n%s", r.code, r.stderr)
	}
}

// daemonProc is a running clihostd.
type daemonProc struct {
	cmd    *exec.Cmd
	proc   *fixture.Proc  // cmd, started: wait with proc.Wait
	log    *fixture.Lines // its stderr
	socket string
	mcp    string // http://127.0.0.1:PORT
	state  string
	ws     string // the daemon's --workspace
}

// startDaemon starts clihostd on a private state directory, socket and loopback port.
func startDaemon(t *testing.T, state string, extra ...string) *daemonProc {
	t.Helper()
	return startDaemonWith(t, state, fixture.Workspace(t), nil, extra...)
}

// startDaemonWith starts clihostd as startDaemon does, in workspace ws, after wrap (when not nil)
// changed how it is started (another user, a wrapper program).
func startDaemonWith(t *testing.T, state, ws string, wrap func(*exec.Cmd), extra ...string) *daemonProc {
	t.Helper()
	// The workspace is the agent's (a root daemon runs its MCP clients' CLIs as its owner), and the
	// state directory reachable by it (installed CLIs and kept homes are there).
	d := &daemonProc{state: state, socket: filepath.Join(state, "ctl.sock"), ws: ws}
	fixture.Reachable(t, filepath.Dir(state))
	args := append([]string{"--state", state, "--socket", d.socket, "--http", "127.0.0.1:0", "--workspace", d.ws}, extra...)
	d.cmd = exec.Command(bin.daemon, args...)
	d.cmd.Env = []string{"PATH=" + systemPath, "HOME=" + t.TempDir(), "CLIHOST_BUNDLES="}
	if wrap != nil {
		wrap(d.cmd)
	}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.proc = fixture.Start(t, d.cmd)
	d.log = fixture.Follow(stderr)
	line := d.waitFor(t, "clihostd ready")
	m := regexp.MustCompile(`mcp"?[=:]"?(http://[^\s"]+)/mcp/`).FindStringSubmatch(line) // text or --log-format json
	if m == nil {
		t.Fatalf("no MCP URL in %q", line)
	}
	d.mcp = m[1]
	return d
}

// waitFor returns the first line of d's log not yet waited for that contains what, failing t
// when the daemon exits first or nothing comes within a minute.
func (d *daemonProc) waitFor(t *testing.T, what string) string {
	t.Helper()
	line, err := d.log.Wait(what, time.Minute)
	if err != nil {
		t.Fatalf("clihostd %v", err)
	}
	return line
}

func (d *daemonProc) ctl(t *testing.T, args ...string) result {
	t.Helper()
	return runBin(t, bin.ctl, "", append([]string{"--socket", d.socket}, args...)...)
}

type bundleStatus struct {
	Key, Install, Version, Reason string
	BinPath                       string `json:"bin_path"`
	Ready                         bool
}

func (d *daemonProc) status(t *testing.T, bundle string) bundleStatus {
	t.Helper()
	r := d.ctl(t, "status", bundle, "--json")
	var st struct{ Bundles []bundleStatus }
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Bundles) != 1 {
		t.Fatalf("status %s: exit %d %v\n%s%s", bundle, r.code, err, r.stdout, r.stderr)
	}
	return st.Bundles[0]
}

// TestDaemonServesStatusMCPAndReloads starts clihostd on the built-in catalog, reads status over
// the control socket, calls MCP over HTTP with and without the token, reloads and stops it.
func TestDaemonServesStatusMCPAndReloads(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	if _, err := exec.LookPath("jq"); err == nil || fixture.CI() { // .ci/run installs jq
		if st := d.status(t, "jq"); st.Install != "installed" || !st.Ready || st.Version == "" {
			t.Fatalf("jq status %+v", st)
		}
	}
	var tok struct{ Token, MCPURL string }
	if r := d.ctl(t, "token", "--json"); json.Unmarshal([]byte(r.stdout), &tok) != nil || len(tok.Token) < 32 {
		t.Fatalf("token: %+v %s", r, r.stderr)
	}
	resp, err := http.Post(d.mcp+"/mcp/jq", "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("MCP without a token: %v %v", resp, err)
	}
	resp.Body.Close()
	hc := &http.Client{Transport: bearer{tok.Token}}
	c, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: d.mcp + "/mcp/jq", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := c.ListTools(context.Background(), nil); err != nil || len(list.Tools) != 3 {
		t.Fatalf("tools over HTTP: %v %v", list, err)
	}
	c.Close()
	mresp, err := hc.Get(d.mcp + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body := new(bytes.Buffer)
	_, _ = body.ReadFrom(mresp.Body)
	mresp.Body.Close()
	if !strings.Contains(body.String(), "clihost_bundles 16") || !strings.Contains(body.String(), "\nclihost_sandbox_pool_target ") ||
		!strings.Contains(body.String(), `clihost_sandbox_pool_takes_total{result="hit"} `) {
		t.Fatalf("metrics (the bundles, the pool of sandbox inits): %s", body)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, "reloading bundles")
	// A second daemon on the same state refuses to start, naming the first.
	r := runBin(t, bin.daemon, "", "--state", d.state, "--socket", filepath.Join(t.TempDir(), "s"), "--http", "127.0.0.1:0")
	if r.code != 1 || !strings.Contains(r.stderr, d.state) || !strings.Contains(strings.ToLower(r.stderr), "another") {
		t.Fatalf("second daemon: exit %d\n%s", r.code, r.stderr)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, "clihostd stopping")
	d.waitFor(t, `level=INFO msg="clihostd stopped"`)
	if err := d.proc.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if _, err := os.Stat(d.socket); err == nil {
		t.Fatal("the control socket was left behind")
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// helloTarGz is a tar.gz holding bin/hello: a script that prints its version.
func helloTarGz(t *testing.T) []byte {
	t.Helper()
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'hello 1.2.3'; else echo \"hi $*\"; fi\n"
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "hello-1.2.3/bin/hello", Mode: 0o755, Size: int64(len(script)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte(script))
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func helloBundle(t *testing.T, url, sum string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "hello", "CLI.md"), `---
name: Hello
id: hello
description: Says hello; installed from a loopback download.
version: 1.0.0
bin: hello
install:
  - { method: download, url: "`+url+`", extract_bin: "hello-1.2.3/bin/hello", verify_sha256: "`+sum+`" }
version_check: { cmd: "hello --version", parse: 'hello (\d+\.\d+\.\d+)', range: "^1.2" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: true, spawn: [sh] }
  env: { pass: [] }
commands:
  greet: ./tools/greet/TOOL.md
---
`)
	writeFile(t, filepath.Join(dir, "hello", "tools", "greet", "TOOL.md"), `---
name: Greet
id: hello.greet
description: Greets someone.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { who: { type: string } }, required: [who] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [greet, "${input.who}"] }
---
`)
	return dir
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDaemonInstallSurvivesKill9 installs a CLI from a loopback download server through the daemon,
// calls it, SIGKILLs the daemon, restarts it on the same state and finds the install intact; a
// bundle whose checksum is wrong installs nothing.
func TestDaemonInstallSurvivesKill9(t *testing.T) {
	archive := helloTarGz(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(archive) }))
	defer srv.Close()
	sum := sha256.Sum256(archive)
	good := helloBundle(t, srv.URL+"/hello.tar.gz", hex.EncodeToString(sum[:]))
	state := t.TempDir()
	d := startDaemon(t, state, "--bundles", good)
	if st := d.status(t, "hello"); st.Install != "missing" || st.Ready {
		t.Fatalf("before install: %+v", st)
	}
	if r := d.ctl(t, "install", "hello"); r.code != 0 || !strings.Contains(r.stdout, "installed hello 1.2.3 with download") {
		t.Fatalf("install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st := d.status(t, "hello")
	if st.Install != "installed" || st.Version != "1.2.3" || !strings.HasPrefix(st.BinPath, state) {
		t.Fatalf("after install: %+v", st)
	}
	r := d.ctl(t, "call", "hello", "greet", "--workspace", d.ws, "--input", `{"who": "world"}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"value": "hi greet world\n"`) {
		t.Fatalf("call through the daemon: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := d.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = d.proc.Wait()
	d2 := startDaemon(t, state, "--bundles", good)
	if st2 := d2.status(t, "hello"); st2.Install != "installed" || st2.BinPath != st.BinPath || !st2.Ready {
		t.Fatalf("after kill -9 and restart: %+v, before: %+v", st2, st)
	}
	_ = d2.cmd.Process.Kill()
	_ = d2.proc.Wait()

	bad := helloBundle(t, srv.URL+"/hello.tar.gz", strings.Repeat("0", 64))
	state2 := t.TempDir()
	d3 := startDaemon(t, state2, "--bundles", bad)
	r = d3.ctl(t, "install", "hello")
	if r.code != 1 || !strings.Contains(r.stderr, strings.Repeat("0", 64)) || !strings.Contains(r.stderr, hex.EncodeToString(sum[:])) {
		t.Fatalf("wrong checksum: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	entries, _ := filepath.Glob(filepath.Join(state2, "bin", "*", "*"))
	if len(entries) != 0 {
		t.Fatalf("a wrong checksum left files: %v", entries)
	}
	if st := d3.status(t, "hello"); st.Install != "missing" {
		t.Fatalf("after a refused install: %+v", st)
	}
}

// TestDaemonReloadsOnFileChange edits a bundle under --bundles and waits for the daemon to reload
// it by itself; a bundle broken by the edit is then refused, and status says why.
func TestDaemonReloadsOnFileChange(t *testing.T) {
	dir := helloBundle(t, "https://example.invalid/hello.tar.gz", strings.Repeat("a", 64))
	d := startDaemon(t, t.TempDir(), "--bundles", dir)
	if st := d.status(t, "hello"); st.Install != "missing" {
		t.Fatalf("before the edit: %+v", st)
	}
	cli := filepath.Join(dir, "hello", "CLI.md")
	data, err := os.ReadFile(cli)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cli, strings.Replace(string(data), "version: 1.0.0", "version: one", 1))
	d.waitFor(t, "reloading bundles (files changed)")
	d.waitFor(t, "bundle refused")
	if st := d.status(t, "hello"); st.Install != "invalid" || !strings.Contains(st.Reason, "clihostctl lint") {
		t.Fatalf("after the edit: %+v", st)
	}
	// Undone and done again: each text the daemon has parsed before is judged as it was then,
	// never as the other (the loader caches files by their text).
	for _, want := range []string{"missing", "invalid"} {
		if want == "missing" {
			writeFile(t, cli, string(data))
		} else {
			writeFile(t, cli, strings.Replace(string(data), "version: 1.0.0", "version: one", 1))
		}
		for deadline := time.Now().Add(time.Minute); d.status(t, "hello").Install != want; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("want %s: %+v", want, d.status(t, "hello"))
			}
		}
	}
}

// TestDaemonSandboxOffIsLoud starts clihostd with --sandbox=off: the log, every status and every
// call result say so. With the sandbox on (every other test) status says "on".
func TestDaemonSandboxOffIsLoud(t *testing.T) {
	fixture.Need(t, "jq")
	d := startDaemon(t, t.TempDir(), "--sandbox=off")
	if r := d.ctl(t, "status", "jq"); !strings.Contains(r.stdout, "WARNING: kernel sandbox off") {
		t.Fatalf("status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := d.ctl(t, "call", "jq", "eval", "--workspace", d.ws, "--input", `{"json": "[1,2]", "filter": "add"}`)
	var env struct {
		OK       bool
		Value    any
		Warnings []string
	}
	if err := json.Unmarshal([]byte(r.stdout), &env); err != nil || !env.OK || len(env.Warnings) != 1 || !strings.Contains(env.Warnings[0], "sandbox is OFF") {
		t.Fatalf("call: exit %d %v %+v\n%s", r.code, err, env, r.stderr)
	}

	on := startDaemon(t, t.TempDir())
	if r := on.ctl(t, "status", "jq", "--json"); !strings.Contains(r.stdout, `"sandbox": "on"`) || strings.Contains(r.stdout, "WARNING") {
		t.Fatalf("status with the sandbox on: %s", r.stdout)
	}
}
