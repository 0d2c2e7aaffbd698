package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// TestAskDeadlinesPartialModel runs ask in-process through the real host and sandbox against fake
// providers that hang: each provider's --timeout and the whole ask's --deadline stop them, the
// stopped call is classified from what it printed (Codex's "waiting for network" is network) and
// not retried, a partial answer comes back marked partial when nobody answers in full, --model
// reaches the provider's model input (a provider without one is skipped), and a local failure
// (EACCES on its config folder) falls back instead of stopping as "authentication".
func TestAskDeadlinesPartialModel(t *testing.T) {
	env := newProviderEnv(t,
		fakeSpec{id: "ok", format: "text"},
		fakeSpec{id: "nomodel", format: "text", noModel: true},
		fakeSpec{id: "stall", fail: "stalled", parse: "stream-json"},
		fakeSpec{id: "stall2", fail: "stalled", parse: "stream-json"},
		fakeSpec{id: "partial", fail: "partial", parse: "stream-json"},
		fakeSpec{id: "eacces", fail: "eacces"})
	cases := []struct {
		name, providers string
		extra           []string
		ok, partial     bool
		attempts        string
		content         string
		max             time.Duration // well above what the case needs, far below the tools' 20 s
	}{
		{"stalled provider times out as network, then falls back", "stall,ok", []string{"--timeout", "1500ms"}, true, false,
			"stall:network ok:ok", "answer from ok: what is up?", 10 * time.Second},
		{"partial answer marked partial", "partial", []string{"--timeout", "1500ms"}, false, true,
			"partial:timeout", "partial answer from partial", 10 * time.Second},
		{"a full answer wins over a partial one", "partial,ok", []string{"--timeout", "1500ms"}, true, false,
			"partial:timeout ok:ok", "answer from ok: what is up?", 10 * time.Second},
		{"the overall deadline ends the chain", "stall,stall2,ok", []string{"--timeout", "10s", "--deadline", "1500ms"}, false, false,
			"stall:network", "", 10 * time.Second},
		{"--model reaches the model input", "ok", []string{"--model", "m-1"}, true, false,
			"ok:ok", "answer from ok (m-1): what is up?", 15 * time.Second},
		{"a provider without a model input is skipped", "nomodel,ok", []string{"--model", "m-1"}, true, false,
			"nomodel:configuration ok:ok", "answer from ok (m-1): what is up?", 15 * time.Second},
		{"a local failure falls back", "eacces,ok", nil, true, false,
			"eacces:local ok:ok", "answer from ok: what is up?", 15 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			a, r := env.ask(c.providers, c.extra...)
			took := time.Since(start)
			if a.OK != c.ok || a.Partial != c.partial || a.attempts() != c.attempts || a.Content != c.content {
				t.Fatalf("ok=%v partial=%v attempts %q content %q; want ok=%v partial=%v %q %q\n%s%s",
					a.OK, a.Partial, a.attempts(), a.Content, c.ok, c.partial, c.attempts, c.content, r.stdout, r.stderr)
			}
			if c.ok != (r.code == 0) || a.Via != "in-process" {
				t.Fatalf("exit %d via %q", r.code, a.Via)
			}
			if took > c.max {
				t.Fatalf("took %s", took)
			}
		})
	}
	// The text form prints the partial answer and says it is partial.
	r := env.run("", "ask", "--workspace", env.ws, "--audit", os.DevNull, "--timeout", "1s", "--providers", "partial", "hi")
	if r.code != 1 || r.stdout != "partial answer from partial\n" || !strings.Contains(r.stderr, "partial") {
		t.Fatalf("text partial: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestAskThroughDaemon: with clihostd running, ask's calls go through it (its sandbox and audit
// log), a provider never set up is skipped rather than ending the chain, and the daemon's circuit
// breaker opens after repeated failures across ask invocations and is visible in status.
func TestAskThroughDaemon(t *testing.T) {
	dir, err := fakeProvider()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, s := range []fakeSpec{{id: "ok", format: "text"}, {id: "down", fail: "server"}, {id: "nosetup", format: "text", setup: true}} {
		for k, v := range fakeBundle(s) {
			files[k] = v
		}
	}
	bundles := fixture.Write(t, files)
	fixture.Reachable(t, bundles)
	state := t.TempDir()
	d := startDaemonWith(t, state, fixture.Workspace(t), func(c *exec.Cmd) { c.Env[0] = "PATH=" + dir + ":" + systemPath },
		"--bundles", bundles, "--no-catalog", "--breaker-threshold", "2", "--breaker-cooldown", "1h")
	ask := func(providers string) askOut {
		t.Helper()
		r := d.ctl(t, "ask", "--json", "--workspace", d.ws, "--backoff", "10ms", "--max-attempts", "1", "--providers", providers, "what is up?")
		var a askOut
		if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
			t.Fatalf("ask %s: exit %d %v\n%s%s", providers, r.code, err, r.stdout, r.stderr)
		}
		if a.Via != "clihostd" {
			t.Fatalf("ask did not go through clihostd: %+v", a)
		}
		return a
	}
	if a := ask("nosetup,ok"); !a.OK || a.attempts() != "nosetup:configuration ok:ok" || !a.Attempts[0].Skipped {
		t.Fatalf("never set up: %+v", a)
	}
	for i := range 2 {
		if a := ask("down,ok"); !a.OK || a.attempts() != "down:server ok:ok" || a.Attempts[0].Skipped {
			t.Fatalf("ask %d: %+v", i, a)
		}
	}
	a := ask("down,ok")
	if !a.OK || a.attempts() != "down:server ok:ok" || !a.Attempts[0].Skipped || a.Attempts[0].Code != "provider_unavailable" {
		t.Fatalf("open breaker: %+v", a)
	}
	r := d.ctl(t, "status", "down", "--json")
	var st struct {
		Bundles []struct {
			Provider *struct{ Breaker struct{ State string } }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Bundles) != 1 || st.Bundles[0].Provider == nil || st.Bundles[0].Provider.Breaker.State != "open" {
		t.Fatalf("status: %v\n%s%s", err, r.stdout, r.stderr)
	}
	if r := d.ctl(t, "status", "down"); !strings.Contains(r.stdout, "down@1: provider circuit breaker open after 2 failed calls (last: server)") {
		t.Fatalf("status text: %s%s", r.stdout, r.stderr)
	}
	audit, err := os.ReadFile(filepath.Join(state, "audit.jsonl"))
	if err != nil || !strings.Contains(string(audit), `"cli_id":"ok"`) || !strings.Contains(string(audit), `"cli_id":"down"`) {
		t.Fatalf("the daemon's audit log lacks ask's calls: %v\n%s", err, audit)
	}
}

// TestAskThroughUnprivilegedDaemon: the shipped deployment, clihostd as an unprivileged user with a
// socket group. ask goes through it for the daemon's own user and for a group member, and the
// circuit breakers are per user: the agent's failures open the provider for the agent only.
func TestAskThroughUnprivilegedDaemon(t *testing.T) {
	fixture.NeedRoot(t)
	fixture.Group(t, sockGroup)
	agent := fixture.User(t, agentName, sockGroup)
	member := fixture.User(t, memberName, sockGroup)
	dir, err := fakeProvider()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, s := range []fakeSpec{{id: "ok", format: "text"}, {id: "down", fail: "server"}} {
		for k, v := range fakeBundle(s) {
			files[k] = v
		}
	}
	bundles := fixture.Write(t, files)
	fixture.Reachable(t, bundles)
	base := t.TempDir()
	fixture.Reachable(t, base)
	state, ws, mws, sock := filepath.Join(base, "state"), filepath.Join(base, "ws"), filepath.Join(base, "mws"), filepath.Join(base, "run", "ctl.sock")
	for _, d := range []string{state, ws, filepath.Dir(sock)} {
		privateDir(t, d, agent.UID, agent.GID, 0o755)
	}
	privateDir(t, mws, member.UID, member.GID, 0o755)
	d := startGroupDaemon(t, agent, state, ws, sock, dir+":", "--bundles", bundles, "--no-catalog", "--breaker-threshold", "1", "--breaker-cooldown", "1h")
	ask := func(u fixture.TestUser, workspace string) askOut {
		t.Helper()
		r := d.ctlAs(t, u, "ask", "--json", "--workspace", workspace, "--max-attempts", "1", "--providers", "down,ok", "what is up?")
		var a askOut
		if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || a.Via != "clihostd" {
			t.Fatalf("ask as %s: exit %d %v\n%s%s", u.Name, r.code, err, r.stdout, r.stderr)
		}
		return a
	}
	if a := ask(agent, ws); !a.OK || a.attempts() != "down:server ok:ok" || a.Attempts[0].Skipped {
		t.Fatalf("agent, first: %+v", a)
	}
	if a := ask(agent, ws); !a.OK || !a.Attempts[0].Skipped || a.Attempts[0].Code != "provider_unavailable" {
		t.Fatalf("agent, breaker open: %+v", a)
	}
	if a := ask(member, mws); !a.OK || a.attempts() != "down:server ok:ok" || a.Attempts[0].Skipped {
		t.Fatalf("member: the agent's breaker shut the provider for another user: %+v", a)
	}
}

// TestAskCutAnswerIsPartial: an answer longer than the host's capture limit (10 MiB of stdout) is
// cut by the host (the envelope says truncated); ask must not present the part it got as the full
// answer. seq prints 14 MB and exits 0, as a provider bundle in the real sandbox.
func TestAskCutAnswerIsPartial(t *testing.T) {
	fixture.Need(t, "seq")
	cli := strings.Replace(fixture.CLI("seq", "seqp", "  ask: ./tools/ask/TOOL.md\n"), "commands:", "metadata:\n  provider: { tool: ask, format: text }\ncommands:", 1)
	files := map[string]string{
		"seqp/CLI.md": cli,
		"seqp/tools/ask/TOOL.md": `---
name: Ask
id: seqp.ask
description: Count to two million, whatever the prompt.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { prompt: { type: string, minLength: 1 } }, required: [prompt] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["1", "2000000"] }
---
`,
	}
	env := &providerEnv{t: t, bundles: fixture.Write(t, files), ws: fixture.Workspace(t), path: systemPath}
	a, r := env.ask("seqp")
	if a.OK || r.code == 0 || !a.Partial || len(a.Attempts) != 1 || a.Attempts[0].OK || !a.Attempts[0].Partial {
		t.Fatalf("a cut answer came back as a full one: ok=%v partial=%v exit %d attempts %+v\n%s", a.OK, a.Partial, r.code, a.Attempts, r.stderr)
	}
	if !strings.HasPrefix(a.Content, "1\n2\n3\n") || len(a.Content) > 10<<20 {
		t.Fatalf("partial content: %d bytes", len(a.Content))
	}
}

// TestAskDeadlineWithStuckDaemon: --deadline is the whole ask's time even when clihostd stops
// answering (here: stopped with SIGSTOP after it started): ask used to wait on the control socket
// for ever, since only the provider's process was bounded (by the call's timeout_ms, in the
// daemon).
func TestAskDeadlineWithStuckDaemon(t *testing.T) {
	dir, err := fakeProvider()
	if err != nil {
		t.Fatal(err)
	}
	bundles := fixture.Write(t, fakeBundle(fakeSpec{id: "ok", format: "text"}))
	fixture.Reachable(t, bundles)
	d := startDaemonWith(t, t.TempDir(), fixture.Workspace(t), func(c *exec.Cmd) { c.Env[0] = "PATH=" + dir + ":" + systemPath },
		"--bundles", bundles, "--no-catalog")
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.cmd.Process.Signal(syscall.SIGCONT) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.ctl, "--socket", d.socket, "ask", "--json", "--workspace", d.ws, "--deadline", "2s", "--providers", "ok", "what is up?")
	cmd.Env = append(os.Environ(), "CLIHOST_BUNDLES=")
	start := time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	if ctx.Err() != nil || took > 15*time.Second {
		t.Fatalf("ask --deadline 2s with a stuck daemon took %s (%v)\n%s", took, err, out)
	}
	if err == nil {
		t.Fatalf("ask succeeded with a stopped daemon:\n%s", out)
	}
}
