package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/fixture"
)

// catProvider is a provider bundle around cat(1): its ask tool prints the workspace file the
// prompt names (an answer) or fails when there is none (a failed provider call), in the real
// sandbox.
func catProvider() map[string]string {
	cli := strings.Replace(fixture.CLI("cat", "catp", "  ask: ./tools/ask/TOOL.md\n"),
		`fs: { read: [], write: [] }`, `fs: { read: ["./**"], write: [] }`, 1)
	cli = strings.Replace(cli, "commands:", "metadata:\n  provider: { tool: ask, format: text }\ncommands:", 1)
	return map[string]string{
		"catp/CLI.md": cli,
		"catp/tools/ask/TOOL.md": `---
name: Ask
id: catp.ask
description: Print the file the prompt names.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { prompt: { type: string, minLength: 1 } }, required: [prompt] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["--", "${input.prompt}"] }
---
`,
	}
}

// TestProviderBreaker: the daemon keeps a circuit breaker per provider bundle across calls: it
// opens after the configured number of consecutive failures (calls are then refused with
// provider_unavailable without running), lets one probe through once the cool-down is over
// (half-open), closes when the probe answers and opens again when it fails. Calls the host refuses
// before running anything do not count. The state shows in the providers route and in status.
func TestProviderBreaker(t *testing.T) {
	e := testEngine(t, catProvider(), func(c *Config) { c.BreakerThreshold, c.BreakerCooldown = 2, time.Hour })
	now := time.Now()
	e.breakers.now = func() time.Time { return now }
	if err := os.WriteFile(filepath.Join(e.workspace, "answer.txt"), []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.Reachable(t, e.workspace)
	ask := func(prompt any) callresult.Envelope {
		in := map[string]any{}
		if prompt != nil {
			in["prompt"] = prompt
		}
		return e.Call(context.Background(), control.CallRequest{Bundle: "catp", Tool: "ask"}, in, control.Caller{User: e.user})
	}
	state := func() control.BreakerState {
		t.Helper()
		ps, err := e.Providers(context.Background(), "catp")
		if err != nil || len(ps) != 1 {
			t.Fatalf("providers: %v %v", ps, err)
		}
		return ps[0].Breaker
	}
	if env := ask("answer.txt"); !env.OK {
		t.Fatalf("answer: %+v", env.Error)
	}
	// Refused before running: neutral.
	for range 3 {
		if env := ask(nil); env.OK || env.Error.Code != errcode.InputInvalid {
			t.Fatalf("no prompt: %+v", env)
		}
	}
	if s := state(); s.State != control.BreakerClosed || s.Failures != 0 {
		t.Fatalf("after refusals: %+v", s)
	}
	for i := range 2 {
		if env := ask("missing.txt"); env.OK || env.Error.ExitCode == nil {
			t.Fatalf("failure %d: %+v", i, env)
		}
	}
	s := state()
	if s.State != control.BreakerOpen || s.Failures != 2 || s.RetryAt == nil || !s.RetryAt.Equal(now.Add(time.Hour).UTC()) || s.LastError == "" {
		t.Fatalf("after 2 failures: %+v", s)
	}
	env := ask("answer.txt")
	if env.OK || env.Error.Code != errcode.ProviderUnavailable || !env.Error.Fallback || env.Error.RetryAfterMS <= 0 {
		t.Fatalf("open breaker let a call through: %+v", env)
	}
	st, err := e.Status(context.Background(), "catp")
	if err != nil || len(st) != 1 || st[0].Provider == nil || st[0].Provider.Breaker.State != control.BreakerOpen {
		t.Fatalf("status: %+v %v", st, err)
	}
	// Cool-down over: one probe; it answers, the breaker closes.
	now = now.Add(time.Hour + time.Second)
	if s := state(); s.State != control.BreakerHalfOpen {
		t.Fatalf("after the cool-down: %+v", s)
	}
	if env := ask("answer.txt"); !env.OK || env.Value != "42\n" && env.Value != "42" {
		t.Fatalf("probe: %+v", env)
	}
	if s := state(); s.State != control.BreakerClosed || s.Failures != 0 {
		t.Fatalf("after a good probe: %+v", s)
	}
	// Open again; a failed probe opens it for another cool-down.
	ask("missing.txt")
	ask("missing.txt")
	now = now.Add(2 * time.Hour)
	if env := ask("missing.txt"); env.OK || env.Error.Code == errcode.ProviderUnavailable {
		t.Fatalf("the probe was not let through: %+v", env)
	}
	if s := state(); s.State != control.BreakerOpen || !s.RetryAt.Equal(now.Add(time.Hour).UTC()) {
		t.Fatalf("after a failed probe: %+v", s)
	}
}

// TestBreakerOneProbe: a half-open breaker lets exactly one call through until it reports.
func TestBreakerOneProbe(t *testing.T) {
	now := time.Now()
	bs := &breakers{now: func() time.Time { return now }}
	bs.record("p@1", false, outcomeFailed, "server", 1, time.Minute)
	if _, refusal := bs.admit("p@1"); refusal == nil {
		t.Fatal("open breaker admitted a call")
	}
	now = now.Add(time.Minute)
	probe, refusal := bs.admit("p@1")
	if !probe || refusal != nil {
		t.Fatalf("half-open: probe %v, %+v", probe, refusal)
	}
	if _, refusal := bs.admit("p@1"); refusal == nil {
		t.Fatal("a second call went through while the probe runs")
	}
	bs.record("p@1", true, outcomeNeutral, "", 1, time.Minute) // the probe was cancelled
	if probe, refusal := bs.admit("p@1"); !probe || refusal != nil {
		t.Fatalf("after a neutral probe: %v %+v", probe, refusal)
	}
}

// TestBreakerHostileInput: no input a caller sends can trip a provider's breaker (a request the
// provider refuses as invalid is neutral), and one user's failures open only that user's breaker.
func TestBreakerHostileInput(t *testing.T) {
	one := 1
	for _, c := range []struct {
		env  callresult.Envelope
		want callOutcome
	}{
		{callresult.Envelope{Error: &callresult.Error{Code: errcode.UpstreamError, ExitCode: &one, Stderr: "API Error: 400 invalid_request_error: model: bogus"}}, outcomeNeutral},
		{callresult.Envelope{Error: &callresult.Error{Code: errcode.UsageError, ExitCode: &one, Stderr: "error: unknown option '--bogus'"}}, outcomeNeutral},
		{callresult.Envelope{OK: true, Value: `{"type":"result","is_error":true,"result":"API Error: 400 {\"type\":\"invalid_request_error\"}"}`}, outcomeNeutral},
		{callresult.Envelope{Error: &callresult.Error{Code: errcode.InputInvalid}}, outcomeNeutral},
		{callresult.Envelope{Error: &callresult.Error{Code: errcode.UpstreamError, ExitCode: &one, Stderr: "API Error: 503 service_unavailable"}}, outcomeFailed},
		{callresult.Envelope{Error: &callresult.Error{Code: errcode.Timeout, ExitCode: &one, PartialStdout: `{"type":"error","message":"Reconnecting... waiting for network"}`}}, outcomeFailed},
		{callresult.Envelope{OK: true, Value: `{"type":"result","is_error":false,"result":"hi"}`}, outcomeOK},
	} {
		if got, _ := providerOutcome(c.env, "stream-json"); got != c.want {
			t.Errorf("%+v: outcome %d, want %d", c.env.Error, got, c.want)
		}
	}
	bs := &breakers{}
	alice, bob := breakerKey("p@1", &control.Peer{UID: 1001}), breakerKey("p@1", &control.Peer{UID: 1002})
	bs.record(alice, false, outcomeFailed, "server", 1, time.Hour)
	if _, refusal := bs.admit(alice); refusal == nil {
		t.Fatal("alice's breaker did not open")
	}
	if _, refusal := bs.admit(bob); refusal != nil {
		t.Fatalf("alice's failures shut the provider for bob: %+v", refusal)
	}
}

// TestBreakerRefusalNamesTheBundle: the refusal of an open breaker names the provider bundle, not
// the breaker's internal key (the bundle, a NUL byte and the caller's uid), which clihostctl ask
// printed to the terminal and the control API put in the message as "claude@1\u00001000".
func TestBreakerRefusalNamesTheBundle(t *testing.T) {
	var bs breakers
	key := breakerKey("claude@1", &control.Peer{UID: 1000})
	bs.record(key, false, outcomeFailed, "server", 1, time.Hour)
	_, refusal := bs.admit(key)
	if refusal == nil {
		t.Fatal("the breaker did not open")
	}
	if m := refusal.Message + refusal.Hint; strings.ContainsRune(m, 0) || !strings.Contains(m, "provider claude@1 is unavailable") {
		t.Fatalf("refusal: %q", m)
	}
}

// TestBreakerCallerTimeout: a call's timeout_ms is the caller's (ask gives each call what is left
// of its --timeout and --deadline), so a call stopped at a limit the caller shortened, with no sign
// of trouble in what the CLI printed, does not count: `ask --timeout 1ms` three times opened a
// healthy provider's breaker for the caller's later asks. A call stopped at the tool's own limit,
// or whose CLI reported trouble before it was stopped (its retry notices), still counts. cat
// waits on a FIFO nobody writes, in the real sandbox.
func TestBreakerCallerTimeout(t *testing.T) {
	files := catProvider()
	files["catp/tools/ask/TOOL.md"] = strings.Replace(files["catp/tools/ask/TOOL.md"], "outputs:", "timeout_ms: 1500\noutputs:", 1)
	e := testEngine(t, files, func(c *Config) { c.BreakerThreshold, c.BreakerCooldown = 2, time.Hour })
	if err := syscall.Mkfifo(filepath.Join(e.workspace, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.Reachable(t, e.workspace)
	ask := func(timeoutMS int64) callresult.Envelope {
		return e.Call(context.Background(), control.CallRequest{Bundle: "catp", Tool: "ask", TimeoutMS: timeoutMS},
			map[string]any{"prompt": "fifo"}, control.Caller{User: e.user})
	}
	state := func() control.BreakerState {
		t.Helper()
		ps, err := e.Providers(context.Background(), "catp")
		if err != nil || len(ps) != 1 {
			t.Fatalf("providers: %v %v", ps, err)
		}
		return ps[0].Breaker
	}
	for i := range 3 {
		if env := ask(50); env.OK || env.Error.Code != errcode.Timeout {
			t.Fatalf("call %d with timeout_ms 50: %s: %s", i, env.Error.Code, env.Error.Message)
		}
	}
	if s := state(); s.State != control.BreakerClosed || s.Failures != 0 {
		t.Fatalf("the caller's short timeouts opened the breaker: %+v", s)
	}
	// The tool's own limit (1.5 s; a longer timeout_ms does not lengthen it): the provider's.
	for i := range 2 {
		if env := ask(60000); env.OK || env.Error.Code != errcode.Timeout {
			t.Fatalf("own limit %d: %s: %s", i, env.Error.Code, env.Error.Message)
		}
	}
	if s := state(); s.State != control.BreakerOpen {
		t.Fatalf("timeouts at the tool's own limit did not open the breaker: %+v", s)
	}
	// Trouble reported before a caller's limit counts.
	one := 1
	if got, _ := providerOutcome(callresult.Envelope{Error: &callresult.Error{Code: errcode.Timeout, ExitCode: &one,
		PartialStdout: `{"type":"error","message":"Reconnecting... waiting for network"}`}}, "stream-json"); got != outcomeFailed {
		t.Fatalf("a CLI waiting for network: outcome %d", got)
	}
}
