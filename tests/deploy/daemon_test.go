package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// daemon is a running clihostd.
type daemon struct {
	what      string // the deployment, for messages: "the unit (User=ct-clihost)"
	cmd       *exec.Cmd
	socket    string         // from its ready line
	httpURL   string         // from its ready line: the base of its MCP and metrics URLs
	tokenFile string         // from its ready line
	log       *fixture.Lines // every line it wrote, for failure messages
}

// daemonSpec is how to start one.
type daemonSpec struct {
	what string
	argv []string // the full command (setpriv … clihostd …)
	env  []string
	dir  string
}

// startDaemon starts spec and waits (at most a minute) for its "clihostd ready" line, failing t
// with everything it logged when it exits first.
func startDaemon(t *testing.T, spec daemonSpec) *daemon {
	t.Helper()
	d := &daemon{what: spec.what}
	d.cmd = exec.Command(spec.argv[0], spec.argv[1:]...)
	d.cmd.Env, d.cmd.Dir = spec.env, spec.dir
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stdout = d.cmd.Stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("%s: start: %v", d.what, err)
	}
	t.Cleanup(func() { d.stop(t) })
	d.log = fixture.Follow(stderr)
	line := d.waitFor(t, "clihostd ready")
	m := regexp.MustCompile(`socket=(\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("%s: no socket in its ready line %q", d.what, line)
	}
	d.socket = m[1]
	if m := regexp.MustCompile(`mcp=(\S+)/mcp/`).FindStringSubmatch(line); m != nil {
		d.httpURL = m[1]
	}
	if m := regexp.MustCompile(`token_file=(\S+)`).FindStringSubmatch(line); m != nil {
		d.tokenFile = m[1]
	}
	return d
}

// expectZygoteServed fails t unless the daemon's zygote built the sandbox of at least one call and
// is up (its /metrics, fetched with its token) and its log says so: the fast path must be the
// deployment's, not only a root host's.
func (d *daemon) expectZygoteServed(t *testing.T) {
	t.Helper()
	tok, err := os.ReadFile(d.tokenFile)
	if err != nil || d.httpURL == "" {
		t.Fatalf("%s: the metrics' address %q or token: %v", d.what, d.httpURL, err)
	}
	page := fixture.Metrics(t, d.httpURL, strings.TrimSpace(string(tok)))
	if !zygoteServed(page) {
		t.Errorf("%s: the zygote built no sandbox, or is not up:\n%s", d.what, page)
	}
	if !strings.Contains(d.logText(), "the sandbox zygote builds the calls' sandboxes") {
		t.Errorf("%s: the daemon's log does not say that the zygote builds the sandboxes:\n%s", d.what, d.logText())
	}
}

// waitFor returns the first line containing what, failing t when the daemon exits first or
// nothing comes within a minute.
func (d *daemon) waitFor(t *testing.T, what string) string {
	t.Helper()
	line, err := d.log.Wait(what, time.Minute)
	if err != nil {
		t.Fatalf("%s: clihostd %v:\n%s", d.what, err, d.logText())
	}
	return line
}

// logText is everything the daemon logged so far.
func (d *daemon) logText() string {
	return strings.Join(d.log.All(), "\n")
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 20s: its drain is 10s).
func (d *daemon) stop(t *testing.T) {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
		t.Errorf("%s: clihostd did not stop within 20s of SIGTERM", d.what)
	}
	if t.Failed() {
		t.Logf("%s: clihostd's log:\n%s", d.what, d.logText())
	}
}

// status reads `clihostctl status --json` as a (nil: root).
func (d *daemon) status(t *testing.T, a *account) statusView {
	t.Helper()
	r := ctl(t, a, d.socket, "status", "--json")
	st, err := parseStatus(r.stdout)
	if err != nil || r.code != 0 {
		t.Fatalf("%s: clihostctl status --json as %v: %v\n%v", d.what, a, err, r)
	}
	return st
}

// envelope is a call's result as clihostctl call prints it.
type envelope struct {
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value"`
	Error *struct {
		Code, Category, Message, Hint string
	} `json:"error"`
	raw result
}

// text is the value of a call whose output format is text.
func (e envelope) text() string {
	var s string
	if json.Unmarshal(e.Value, &s) != nil {
		return string(e.Value)
	}
	return s
}

// call runs `clihostctl call BUNDLE TOOL --input INPUT --workspace WS` as a through the daemon. A
// response that is no envelope (the socket refused the caller, say) comes back with OK false and
// Error nil; raw holds the process's output either way.
func (d *daemon) call(t *testing.T, a *account, ws, bundle, tool, input string) envelope {
	t.Helper()
	r := ctl(t, a, d.socket, "call", bundle, tool, "--input", input, "--workspace", ws)
	var e envelope
	_ = json.Unmarshal([]byte(r.stdout), &e)
	e.raw = r
	return e
}

// rawCall is call made the way a client that skips clihostctl's own checks makes it: curl posting
// the request to /v1/call on the control socket as a. The daemon alone decides.
func (d *daemon) rawCall(t *testing.T, a *account, ws, bundle, tool, input string) envelope {
	t.Helper()
	req, err := json.Marshal(map[string]any{"bundle": bundle, "tool": tool, "input": json.RawMessage(input), "workspace": ws})
	if err != nil {
		t.Fatal(err)
	}
	argv := asUser(a, "curl", "-sS", "--unix-socket", d.socket, "-X", "POST", "-H", "Content-Type: application/json",
		"--data-binary", string(req), "http://clihostd/v1/call")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = userEnv(a)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: curl as %v: %v\n%s", d.what, a, err, errb.String())
	}
	var e envelope
	_ = json.Unmarshal([]byte(out.String()), &e)
	e.raw = result{0, out.String(), errb.String()}
	return e
}

// mustCall is call, failing t (naming the deployment, the caller and what was expected) unless
// the call succeeded.
func (d *daemon) mustCall(t *testing.T, a *account, ws, bundle, tool, input, expect string) envelope {
	t.Helper()
	e := d.call(t, a, ws, bundle, tool, input)
	if !e.OK {
		t.Errorf("%s: %s %s as %v in %s should succeed (%s); got:\n%v", d.what, bundle, tool, a, ws, expect, e.raw)
	}
	return e
}

// expectInstalled fails t unless r is `clihostctl install BUNDLE --json` that ended "done" with a
// version: the daemon verified the CLI (its version check ran as a uid with a HOME of its own).
func expectInstalled(t *testing.T, what string, r result) {
	t.Helper()
	var ev struct{ Phase, Version string }
	_ = json.Unmarshal([]byte(r.stdout), &ev)
	if r.code != 0 || ev.Phase != "done" || ev.Version == "" {
		t.Errorf("%s: the install must end done with the version found (the version check runs as a uid with a HOME of its own); got:\n%v", what, r)
	}
}

// markBundle is an operator's bundle "mark" around /usr/bin/touch: its tool file creates the
// file NAME in the workspace, whose owner then shows, from outside the sandbox, the uid the CLI ran
// as (inside a user namespace the CLI may see another).
func markBundle() map[string]string {
	cli := strings.Replace(fixture.CLI("touch", "mark", "  file: ./tools/file/TOOL.md\n"),
		"fs: { read: [], write: [] }", `fs: { read: ["./**"], write: ["./**"] }`, 1)
	return map[string]string{
		"mark/CLI.md": cli,
		"mark/tools/file/TOOL.md": `---
name: File
id: mark.file
description: Creates an empty file in the workspace.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { name: { type: string, pattern: "^[a-z0-9-]+$" } }, required: [name] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["${input.name}"], output: { format: text } }
---
`,
	}
}

// projectBundle is an operator's bundle "project" with one setup step, name, kept in the CLI's
// environment as CT_PROJECT; its tool show prints it (printenv CT_PROJECT).
func projectBundle() map[string]string {
	cli := strings.Replace(fixture.CLI("printenv", "project", "  show: ./tools/show/TOOL.md\n"), "commands:\n",
		"setup:\n  - { id: name, kind: prompt, type: text, prompt: \"Project name?\", persist: { env: CT_PROJECT } }\ncommands:\n", 1)
	return map[string]string{
		"project/CLI.md": cli,
		"project/tools/show/TOOL.md": `---
name: Show
id: project.show
description: Prints the project name set up for this workspace.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["CT_PROJECT"], output: { format: text } }
---
`,
	}
}

// marks numbers the files mark.file creates.
var marks atomic.Int64

// ranAs calls mark.file as a (nil: root) in ws and returns the owner of the file it created: the
// uid the CLI ran as. ok is false (and t has failed, saying what was expected) when the call
// failed; e is the call's result.
func (d *daemon) ranAs(t *testing.T, a *account, ws, expect string) (uid int, ok bool, e envelope) {
	t.Helper()
	name := fmt.Sprintf("mark-%d", marks.Add(1))
	e = d.mustCall(t, a, ws, "mark", "file", fmt.Sprintf(`{"name": %q}`, name), expect)
	if !e.OK {
		return 0, false, e
	}
	fi, err := os.Lstat(filepath.Join(ws, name))
	if err != nil {
		t.Errorf("%s: mark file as %v in %s succeeded but created no file: %v", d.what, a, ws, err)
		return 0, false, e
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid), true, e
}

// writeBundles writes files (relative path → content) under dir, readable by everyone.
func writeBundles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := dir + "/" + p
		if err := os.MkdirAll(full[:strings.LastIndex(full, "/")], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sampleJSON is the file the jq calls filter.
const sampleJSON = `{"name":"clihost","items":[{"id":1,"state":"open"},{"id":2,"state":"closed"}]}`

// jqInput is the jq filter call on data.json and what it prints.
const (
	jqInput = `{"filter": "[.items[] | select(.state == \"open\") | .id]", "files": ["data.json"], "compact": true}`
	jqWant  = "[1]"
)

// checkJQ asserts that e is jq's answer for jqInput.
func checkJQ(t *testing.T, what string, e envelope) {
	t.Helper()
	if e.OK && strings.TrimSpace(e.text()) != jqWant {
		t.Errorf("%s: jq filter printed %q, want %q", what, e.text(), jqWant)
	}
}

// fmtAccounts is for messages.
func fmtAccounts(as ...*account) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = fmt.Sprint(a)
	}
	return strings.Join(s, ", ")
}

// zygoteServed reports whether a /metrics page says the zygote runs and built at least one
// call's sandbox.
func zygoteServed(page string) bool {
	takes, _ := fixture.MetricValue(page, `clihost_sandbox_pool_takes_total{result="zygote"}`)
	up, _ := fixture.MetricValue(page, "clihost_sandbox_zygote_up")
	return takes >= 1 && up == 1
}
