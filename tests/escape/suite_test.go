package escape

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// Environment variables the host "has" (host.Options.LookupEnv) for the env bundle's env.pass.
const (
	hostBashEnv = "/usr/lib/clihost-escape-bashenv.sh"
	hostPassed  = "passed from the host"
)

// envRefused are the code-loading variables newSuite adds to the env bundle's env.set after lint.
var envRefused = map[string]string{"BASH_ENV": "/usr/lib/clihost-escape-set.sh", "PYTHONPATH": "/tmp", "NODE_OPTIONS": "--require /tmp/x.js"}

// sandboxes are the bundles of the corpus, by id: the YAML body of each one's sandbox block. The
// string OUTSIDE stands for the outside directory. Every bundle runs the same probe.
var sandboxes = map[string]string{
	// ro: the workspace and outside/granted readable, nothing writable, three kinds of deny, no
	// exec, no network, no environment. Most denials run here.
	"ro": `
  network: { egress: [] }
  fs:
    read: ["./**", "OUTSIDE/granted/**"]
    write: []
    deny: ["./secret.txt", "./private/**", "**/.env"]
  exec: { allow: false }
  env: { pass: [] }`,
	// rw: a writable workspace, with one denied file in it.
	"rw": `
  network: { egress: [] }
  fs: { read: ["./**"], write: ["./**"], deny: ["./secret.txt"] }
  exec: { allow: false }
  env: { pass: [] }`,
	// spawn: may run true (a dynamic ELF: the ELF interpreter is executable too) and a #!/bin/sh
	// script.
	"spawn": `
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: true, spawn: ["true", "OUTSIDE/tools/ok.sh"] }
  env: { pass: [] }`,
	// env: passes and sets harmless variables; newSuite adds code-loading ones (envRefused) after
	// lint, as a bundle that got past it would: lint reports every variable the sandbox drops
	// (sandbox-env-loader, sandbox-env-refused), and a bundle with lint errors does not load, so
	// the runtime drop is the second line.
	"env": `
  network: { egress: [] }
  fs: { read: [], write: [] }
  exec: { allow: false }
  env:
    pass: [PROBE_PASSED]
    set: { PROBE_SET: "set by the bundle" }`,
	// net: declares egress, so Landlock's TCP rule is the egress one (connect only to the proxy and
	// capture ports inside the namespace) instead of deny-all.
	"net": `
  network: { egress: [example.com] }
  fs: { read: [], write: [] }
  exec: { allow: false }
  env: { pass: [] }`,
	// tty: runs on a pseudo-terminal, which becomes the probe's controlling terminal.
	"tty": `
  network: { egress: [] }
  fs: { read: [], write: [] }
  exec: { allow: false }
  env: { pass: [] }
  tty: { required: true }`,
	// race: reads the workspace and writes only its sub/ directory, which TestRace keeps swapping
	// for a symbolic link to a directory outside while calls start.
	"race": `
  network: { egress: [] }
  fs: { read: ["./**"], write: ["./sub/**"] }
  exec: { allow: false }
  env: { pass: [] }`,
	// walk: reads the workspace but a denied directory and a denied file, and runs the real tree
	// walkers over it (TestTreeWalkers).
	"walk": `
  network: { egress: [] }
  fs: { read: ["./**", "/etc/gitconfig"], write: [], deny: ["./private/**", "./secret.txt"] }
  exec: { allow: true, spawn: ["rg", "grep", "find", "git"] }
  env: { pass: [] }`,
	// state: grants the directory holding clihost's own state; the host's ExtraDeny names the token.
	"state": `
  network: { egress: [] }
  fs: { read: ["OUTSIDE/state/**"], write: [] }
  exec: { allow: false }
  env: { pass: [] }`,
}

// probeFiles returns the CLI.md and TOOL.md of the probe bundle id with the given sandbox block.
// Its one tool, run, passes input case and args to the probe and parses its JSON line.
func probeFiles(id, sandbox string) map[string]string {
	return map[string]string{
		id + "/CLI.md": `---
name: Escape probe ` + id + `
id: ` + id + `
description: A hostile CLI for the escape corpus.
version: 1.0.0
bin: probe
install: [{ method: go, package: "github.com/clihost/clihost/tests/escape/probe@latest" }]
version_check: { cmd: "probe --version", parse: 'probe (\d+\.\d+\.\d+)', range: ">=1.0.0" }
sandbox:` + sandbox + `
commands:
  run: ./tools/run/TOOL.md
---
`,
		id + "/tools/run/TOOL.md": `---
name: Run
id: ` + id + `.run
description: Performs one escape attempt.
version: 1.0.0
inputs:
  type: object
  additionalProperties: false
  properties:
    case: { type: string }
    args: { type: array, items: { type: string } }
  required: [case]
outputs: { type: object }
timeout_ms: 30000
runner: { cli: ../../CLI.md, argv: ["${input.case}", "${input.args}"], output: { format: json } }
---
`,
	}
}

// suite is one test's host over every corpus bundle, and its workspaces.
type suite struct {
	h *host.Host
	// off is the same host with the sandbox turned off (clihostd --sandbox=off), for baselines.
	off *host.Host
	// ro is the read-only workspace (see roFiles); rw the writable one (see rwFiles); empty is an
	// empty workspace under /tmp; outWS the workspace outside /tmp.
	ro, rw, empty, outWS string
	// hostTmp is an undeclared, world-readable directory under the host's /tmp, holding
	// undeclared.txt.
	hostTmp string
}

// roFiles are the files of the ro workspace; links are made by newSuite.
var roFiles = map[string]string{
	"hello.txt":   "hello from the workspace\n",
	"secret.txt":  "denied by fs.deny\n",
	"private/key": "denied by fs.deny dir/**\n",
	".env":        "TOKEN=denied-by-glob\n",
	"sub/.env":    "TOKEN=nested-denied-by-glob\n",
	"owned.txt":   "owned by the agent, on a read-only mount\n",
	"evil.sh":     "#!/usr/bin/perl\nprint \"pwned\\n\";\n",
}

// rwFiles are the files of the rw workspace: a git repository with a hook and a config, a second
// repository ("bare") whose hooks directory does not exist, and a third ("linked") whose
// .git/hooks newSuite makes a symbolic link to linkedhooks.
var rwFiles = map[string]string{
	"hello.txt":               "hello from the writable workspace\n",
	"secret.txt":              "denied by fs.deny\n",
	".git/HEAD":               "ref: refs/heads/main\n",
	".git/config":             "[core]\n\trepositoryformatversion = 0\n",
	".git/hooks/pre-commit":   "#!/bin/sh\nexit 0\n",
	"bare/.git/HEAD":          "ref: refs/heads/main\n",
	"bare/.git/config":        "[core]\n\trepositoryformatversion = 0\n",
	"bare/.git/objects/.keep": "",
	"linked/.git/HEAD":        "ref: refs/heads/main\n",
	"linkedhooks/pre-commit":  "#!/bin/sh\nexit 0\n",
}

// newSuite builds the workspaces and a host over every bundle in sandboxes. The host finds the
// probe on its PATH, passes BASH_ENV and PROBE_PASSED to bundles that ask, and masks
// outside/state/token in every sandbox (ExtraDeny), as clihostd masks its own token.
func newSuite(t *testing.T) *suite {
	t.Helper()
	requireCorpus(t)
	files := map[string]string{}
	for id, sb := range sandboxes {
		for p, c := range probeFiles(id, strings.ReplaceAll(sb, "OUTSIDE", outside)) {
			files[p] = c
		}
	}
	reg := fixture.Registry(t, files)
	env, err := reg.Get("env")
	must(t, err)
	env.CLI.Sandbox.Env.Pass = append(env.CLI.Sandbox.Env.Pass, "BASH_ENV")
	maps.Copy(env.CLI.Sandbox.Env.Set, envRefused)
	hostEnv := map[string]string{
		"PATH":         probeDir + ":/usr/bin:/bin",
		"BASH_ENV":     hostBashEnv,
		"PROBE_PASSED": hostPassed,
	}
	opts := host.Options{
		LookupEnv: func(k string) (string, bool) { v, ok := hostEnv[k]; return v, ok },
		// Through a pool of inits, as clihostd starts them (the attack, audit and git hosts start
		// theirs cold, as clihostctl's in-process calls do: the corpus covers both).
		Sandbox: host.SandboxOptions{ExtraDeny: []string{filepath.Join(outside, "state", "token")}, Pool: pool},
	}
	h := host.New(reg, opts)
	opts.Sandbox.Off = true
	s := &suite{h: h, off: host.New(reg, opts), ro: fixture.Workspace(t), rw: fixture.Workspace(t), empty: fixture.Workspace(t), outWS: filepath.Join(outside, "ws")}
	write(t, s.ro, roFiles)
	must(t, os.Chmod(filepath.Join(s.ro, "evil.sh"), 0o755))
	// Symbolic links planted before the call (the probe also makes its own in rw).
	for link, target := range map[string]string{
		"link-outside": filepath.Join(outside, "secret"),
		"link-shadow":  "/etc/shadow",
		"link-secret":  filepath.Join(s.ro, "secret.txt"),
	} {
		must(t, os.Symlink(target, filepath.Join(s.ro, link)))
	}
	fixture.GiveToAgent(t, s.ro)
	write(t, s.rw, rwFiles)
	// §7.7: a repository whose .git/hooks is a symbolic link to a directory of the workspace.
	must(t, os.Symlink(filepath.Join(s.rw, "linkedhooks"), filepath.Join(s.rw, "linked", ".git", "hooks")))
	fixture.GiveToAgent(t, s.rw)
	s.hostTmp = t.TempDir()
	write(t, s.hostTmp, map[string]string{"undeclared.txt": "in the host's /tmp\n"})
	must(t, os.Chmod(s.hostTmp, 0o755))
	must(t, os.Chmod(filepath.Dir(s.hostTmp), 0o755))
	return s
}

// write writes files (relative path → content) under dir.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, []byte(c), 0o644))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// report is the probe's JSON line (see package probe).
type report struct {
	Case   string `json:"case"`
	Result string `json:"result"`
	Step   string `json:"step"`
	Errno  string `json:"errno"`
	Signal string `json:"signal"`
	Exit   *int   `json:"exit"`
	Detail string `json:"detail"`
}

// callOn runs the probe's case with args in bundle id's sandbox on host h, with workspace ws, and
// returns its report. The call itself must succeed (the probe always exits 0): anything else, such
// as a sandbox_unavailable error, fails the test.
func callOn(t *testing.T, h *host.Host, id, ws, probeCase string, args ...string) report {
	t.Helper()
	return reportOf(t, id, probeCase, args, callProbe(t, h, id, ws, probeCase, args...))
}

// callProbe runs the probe's case with args in bundle id's sandbox on host h, as the user
// "escape" with workspace ws and a minute's timeout, and returns the call's envelope.
func callProbe(t *testing.T, h *host.Host, id, ws, probeCase string, args ...string) host.Envelope {
	t.Helper()
	b, err := h.Bundle(id)
	if err != nil {
		t.Fatal(err)
	}
	input := map[string]any{"case": probeCase}
	if len(args) > 0 {
		list := make([]any, len(args))
		for i, a := range args {
			list[i] = a
		}
		input["args"] = list
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return h.Call(ctx, b, "run", input, host.Caller{Workspace: ws, User: "escape"}, host.CallOptions{})
}

// reportOf is the probe's report in env, the envelope of a call of probeCase with args in
// bundle id: the call must have succeeded (the probe always exits 0) with a report of that case,
// or the test fails.
func reportOf(t *testing.T, id, probeCase string, args []string, env host.Envelope) report {
	t.Helper()
	if !env.OK {
		t.Fatalf("%s %s %q: the call failed: %+v", id, probeCase, args, env.Error)
	}
	raw, err := json.Marshal(env.Value)
	if err != nil {
		t.Fatal(err)
	}
	var r report
	if err := json.Unmarshal(raw, &r); err != nil || r.Case != probeCase {
		t.Fatalf("%s %s: probe output %s: %v", id, probeCase, raw, err)
	}
	return r
}

// want is what a probe must report.
type want struct {
	result string // "allowed" or "denied"; empty: either (the other fields decide)
	step   string // when set, the step that produced the result
	errno  string // when set (or result is denied without signal, exit or detail), the exact errno
	// errnos, when set, are the errnos accepted instead of errno ("" for a call that succeeded):
	// only where the refusing layer legitimately varies.
	errnos []string
	signal string // when set, the signal that killed the probe's child
	exit   *int   // when set, the exit status of the probe's child
	detail string // when set, a substring of the detail
	// details, when set, are substrings one of which the detail must contain: only where the
	// sandbox's shape legitimately varies (an init's PID 1 or the zygote's).
	details []string
	empty   bool // the detail must be empty (a read or listing that got nothing)
	// without are strings that must not occur in the detail.
	without []string
}

// denied is a refusal of step with errno.
func denied(step, errno string) want { return want{result: "denied", step: step, errno: errno} }

// allowed is a success whose detail contains detail.
func allowed(detail string) want { return want{result: "allowed", detail: detail} }

// masked is what reading (step "read") or listing (step "readdir") a masked deny path yields: it
// succeeds and gets nothing.
func masked(step string) want { return want{result: "allowed", step: step, empty: true} }

// check compares r with w.
func (w want) check(t *testing.T, r report) {
	t.Helper()
	bad := (w.result != "" && r.Result != w.result) ||
		(w.step != "" && r.Step != w.step) ||
		(w.result == "denied" && w.signal == "" && w.exit == nil && w.detail == "" && w.details == nil && w.errnos == nil && r.Errno != w.errno) ||
		(w.errnos != nil && !slices.Contains(w.errnos, r.Errno)) ||
		(w.errno != "" && r.Errno != w.errno) ||
		(w.signal != "" && r.Signal != w.signal) ||
		(w.exit != nil && (r.Exit == nil || *r.Exit != *w.exit)) ||
		(w.detail != "" && !strings.Contains(r.Detail, w.detail)) ||
		(w.details != nil && !slices.ContainsFunc(w.details, func(d string) bool { return strings.Contains(r.Detail, d) })) ||
		(w.empty && r.Detail != "") ||
		slices.ContainsFunc(w.without, func(s string) bool { return strings.Contains(r.Detail, s) })
	if bad {
		t.Errorf("probe %s reported %+v (exit %s), want result %q step %q errno %q%s signal %q exit %s detail ⊇ %q%q",
			r.Case, r, intString(r.Exit), w.result, w.step, w.errno, errnosString(w.errnos), w.signal, intString(w.exit), w.detail, w.details)
	}
}

func intString(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func errnosString(e []string) string {
	if e == nil {
		return ""
	}
	return fmt.Sprintf(" (one of %v)", e)
}

func intPtr(i int) *int { return &i }

// probeCase is one row of a corpus table.
type probeCase struct {
	name   string
	bundle string
	ws     func(*suite) string // the workspace; nil: s.ro
	probe  string
	args   func(*suite) []string // nil: none
	want   want
	// unsandboxed runs the probe with the sandbox off: a baseline showing that the probe's
	// attempt works when nothing stops it.
	unsandboxed bool
	// after, when set, checks the host side once the probe has run (e.g. that nothing was written).
	after func(*testing.T, *suite)
	// lines, when set, must each be a whole line of the detail.
	lines []string
}

// run runs every case of table as a subtest.
func (s *suite) run(t *testing.T, table []probeCase) {
	t.Helper()
	for _, c := range table {
		t.Run(c.name, func(t *testing.T) {
			ws := s.ro
			if c.ws != nil {
				ws = c.ws(s)
			}
			var args []string
			if c.args != nil {
				args = c.args(s)
			}
			h := s.h
			if c.unsandboxed {
				h = s.off
			}
			r := callOn(t, h, c.bundle, ws, c.probe, args...)
			t.Logf("%s %s %q → %s %s errno=%s signal=%s exit=%s: %s", c.bundle, c.probe, args, r.Result, r.Step, r.Errno, r.Signal, intString(r.Exit), r.Detail)
			c.want.check(t, r)
			for _, l := range c.lines {
				if !slices.Contains(strings.Split(r.Detail, "\n"), l) {
					t.Errorf("probe %s: no line %q in %q", r.Case, l, r.Detail)
				}
			}
			if c.after != nil {
				c.after(t, s)
			}
		})
	}
}

// in returns a workspace-relative args function: each arg is joined to the workspace ws(s).
func in(ws func(*suite) string, rel ...string) func(*suite) []string {
	return func(s *suite) []string {
		out := make([]string, len(rel))
		for i, r := range rel {
			out[i] = filepath.Join(ws(s), r)
		}
		return out
	}
}

// lit returns an args function of fixed arguments.
func lit(args ...string) func(*suite) []string {
	return func(*suite) []string { return args }
}

// out returns an args function of paths under the outside directory.
func out(rel ...string) func(*suite) []string {
	return func(*suite) []string {
		res := make([]string, len(rel))
		for i, r := range rel {
			res[i] = filepath.Join(outside, r)
		}
		return res
	}
}

// Workspace selectors for probeCase.ws and in.
func roWS(s *suite) string    { return s.ro }
func rwWS(s *suite) string    { return s.rw }
func emptyWS(s *suite) string { return s.empty }
func outWS(s *suite) string   { return s.outWS }

// counter counts what a host-side server received. poke sends the server one connection or
// datagram of the test's own (a marker), and pokes counts the markers sent.
type counter struct {
	n     atomic.Int64
	poke  func() error
	pokes int64
}

func (c *counter) add()       { c.n.Add(1) }
func (c *counter) get() int64 { return c.n.Load() }

// others sends the server a marker and waits, up to 10 s, until the server has counted it; it
// returns how many connections or datagrams the server received besides the test's markers. The
// server takes connections from its accept queue and datagrams from its receive queue in the order
// they arrived, so whatever reached it before the marker (from a sandboxed probe that finished
// before others was called) is counted by then: the marker is the positive event that makes "the
// server received nothing" a finding rather than a guess about how long a packet takes.
func (c *counter) others(t *testing.T) int64 {
	t.Helper()
	c.pokes++
	if err := c.poke(); err != nil {
		t.Fatalf("host side: the test's own marker: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); c.get() < c.pokes; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("host side: the server did not count the test's own marker within 10 s (%d counted, %d markers sent)", c.get(), c.pokes)
		}
	}
	return c.get() - c.pokes
}

// dialPoke returns a counter's poke that connects to addr over network and closes the connection.
func dialPoke(network, addr string) func() error {
	return func() error {
		conn, err := net.Dial(network, addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}
}

// serveStream accepts connections on l until it is closed, counting them and greeting each.
func serveStream(t *testing.T, l net.Listener, greeting string) *counter {
	t.Helper()
	c := &counter{poke: dialPoke(l.Addr().Network(), l.Addr().String())}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.add()
			fmt.Fprint(conn, greeting)
			conn.Close()
		}
	}()
	return c
}

// servePackets reads datagrams from pc until it is closed, counting them.
func servePackets(t *testing.T, pc net.PacketConn) *counter {
	t.Helper()
	c := &counter{poke: func() error {
		conn, err := net.Dial("udp", pc.LocalAddr().String())
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = conn.Write([]byte("marker"))
		return err
	}}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			c.add()
		}
	}()
	return c
}

func itoa(i int) string { return strconv.Itoa(i) }
