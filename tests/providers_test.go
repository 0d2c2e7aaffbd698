package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// fakeProvider builds testdata/fakeprovider once into a directory the sandboxed agent uid can
// reach (beside the built binaries, so TestMain removes it), and returns that directory (it goes
// first on PATH).
var fakeProvider = sync.OnceValues(func() (string, error) {
	dir := filepath.Join(filepath.Dir(bin.ctl), "fakeprovider")
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return "", err
		}
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "fakeprovider"), "./testdata/fakeprovider")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build fakeprovider: %v\n%s", err, out)
	}
	return dir, nil
})

// fakeSpec is one fake provider bundle: fakeprovider with its behaviour set in the environment.
type fakeSpec struct {
	id, fail, format, parse string
	fails                   int // fail only the first N calls; 0: every call (when fail is set)
	bin                     string
	timeoutMS               int
	noModel                 bool // the tool has no model input
	setup                   bool // the bundle has a setup step (never done in these tests)
}

func fakeBundle(s fakeSpec) map[string]string {
	bin, parse, timeout := s.bin, s.parse, s.timeoutMS
	if bin == "" {
		bin = "fakeprovider"
	}
	if parse == "" {
		parse = "text"
	}
	if timeout == 0 {
		timeout = 20000
	}
	inputs := `{ type: object, additionalProperties: false, properties: { prompt: { type: string, minLength: 1 }, model: { type: string } }, required: [prompt] }`
	argv := `["${input.model | optional('--model')}", "--", "${input.prompt}"]`
	if s.noModel {
		inputs = `{ type: object, additionalProperties: false, properties: { prompt: { type: string, minLength: 1 } }, required: [prompt] }`
		argv = `["--", "${input.prompt}"]`
	}
	setup := ""
	if s.setup {
		setup = "setup:\n  - { id: token, kind: prompt, type: secret, prompt: \"A token\", persist: { env: FAKE_TOKEN } }\n"
	}
	fails := ""
	if s.fails > 0 {
		fails = fmt.Sprintf("      FAKE_FAILS: \"%d\"\n", s.fails)
	}
	return map[string]string{
		s.id + "/CLI.md": fmt.Sprintf(`---
name: Fake %[1]s
id: %[1]s
description: A fake agent CLI for the provider tests.
version: 1.0.0
bin: %[2]s
install: [{ method: npm, package: fakeprovider }]
version_check: { cmd: "%[2]s --version", parse: 'fakeprovider (\d+\.\d+\.\d+)', range: ">=1 <2" }
%[7]ssandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: ["./**"] }
  exec: { allow: false }
  env:
    pass: []
    set:
      FAKE_ID: "%[1]s"
      FAKE_FAIL: "%[3]s"
      FAKE_FORMAT: "%[4]s"
%[5]scommands:
  ask: ./tools/ask/TOOL.md
metadata:
  provider: { tool: ask, format: %[6]s }
---
`, s.id, bin, s.fail, s.format, fails, parse, setup),
		s.id + "/tools/ask/TOOL.md": fmt.Sprintf(`---
name: Ask
id: %s.ask
description: Ask the fake provider.
version: 1.0.0
inputs: %s
outputs: { type: string }
timeout_ms: %d
runner: { cli: ../../CLI.md, argv: %s }
---
`, s.id, inputs, timeout, argv),
	}
}

type askOut struct {
	OK        bool
	Provider  string
	Content   string
	Partial   bool
	Via       string
	Estimated bool
	Usage     struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	}
	Attempts []struct {
		Provider       string
		Attempt        int
		OK             bool
		Code           string
		Skipped        bool
		Partial        bool
		Category       string
		ShouldRetry    bool  `json:"should_retry"`
		ShouldFallback bool  `json:"should_fallback"`
		RetryAfterMS   int64 `json:"retry_after_ms"`
	}
	Error *struct{ Category, Message, Provider string }
}

// attempts renders the attempts as "provider:category" ("provider:ok" for the answer).
func (a askOut) attempts() string {
	var out []string
	for _, x := range a.Attempts {
		c := x.Category
		if x.OK {
			c = "ok"
		}
		out = append(out, x.Provider+":"+c)
	}
	return strings.Join(out, " ")
}

// providerEnv runs clihostctl with the fake provider bundles, PATH leading to fakeprovider.
type providerEnv struct {
	t       *testing.T
	bundles string
	ws      string
	path    string
}

func newProviderEnv(t *testing.T, specs ...fakeSpec) *providerEnv {
	t.Helper()
	dir, err := fakeProvider()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, s := range specs {
		for k, v := range fakeBundle(s) {
			files[k] = v
		}
	}
	return &providerEnv{t: t, bundles: fixture.Write(t, files), ws: fixture.Workspace(t), path: dir + ":" + systemPath}
}

func (e *providerEnv) run(stdin string, args ...string) result {
	e.t.Helper()
	all := append([]string{"--bundles", e.bundles}, args...)
	cmd := exec.Command(bin.ctl, all...)
	cmd.Env = []string{"PATH=" + e.path, "HOME=" + e.t.TempDir(), "CLIHOST_BUNDLES="}
	cmd.Stdin = strings.NewReader(stdin)
	o, err := fixture.Run(cmd)
	if err != nil {
		e.t.Fatal(err)
	}
	return result{o.Code, o.Stdout, o.Stderr}
}

func (e *providerEnv) ask(providers string, extra ...string) (askOut, result) {
	e.t.Helper()
	args := append([]string{"ask", "--json", "--workspace", e.ws, "--audit", os.DevNull, "--backoff", "10ms", "--providers", providers}, extra...)
	r := e.run("", append(args, "what is up?")...)
	var a askOut
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		e.t.Fatalf("ask %s: exit %d, not JSON: %v\n%s%s", providers, r.code, err, r.stdout, r.stderr)
	}
	return a, r
}

// TestAskRetryAndFallback runs `clihostctl ask` through the real host and sandbox against fake
// provider CLIs failing with every error class.
func TestAskRetryAndFallback(t *testing.T) {
	classes := []string{"quota", "rate_limit", "authentication", "validation", "network", "server", "timeout", "not_found", "configuration", "unknown"}
	specs := []fakeSpec{{id: "ok", format: "text"}, {id: "nobin", bin: "no-such-provider-cli"},
		{id: "flaky", fail: "rate_limit", fails: 2}, {id: "slow", fail: "sleep", timeoutMS: 700},
		{id: "jsonerr", fail: "json_error", parse: "stream-json"}}
	for _, c := range classes {
		specs = append(specs, fakeSpec{id: "f-" + strings.ReplaceAll(c, "_", "-"), fail: c})
	}
	env := newProviderEnv(t, specs...)
	cases := []struct {
		providers string
		extra     []string
		ok        bool
		attempts  string
	}{
		// Retry (rate_limit honours the 20ms it names; server, network, timeout back off), then
		// fall back where the class says so.
		{"flaky,ok", nil, true, "flaky:rate_limit flaky:rate_limit flaky:ok"},
		{"f-rate-limit,ok", nil, false, "f-rate-limit:rate_limit f-rate-limit:rate_limit f-rate-limit:rate_limit"},
		{"f-server,ok", []string{"--max-attempts", "2"}, true, "f-server:server f-server:server ok:ok"},
		{"f-network,ok", []string{"--max-attempts", "2"}, true, "f-network:network f-network:network ok:ok"},
		{"f-timeout,ok", []string{"--max-attempts", "2"}, true, "f-timeout:timeout f-timeout:timeout ok:ok"},
		{"slow,ok", []string{"--max-attempts", "1"}, true, "slow:timeout ok:ok"},
		// Fall back without retrying.
		{"f-quota,ok", nil, true, "f-quota:quota ok:ok"},
		{"f-not-found,ok", nil, true, "f-not-found:not_found ok:ok"},
		{"f-unknown,ok", nil, true, "f-unknown:unknown ok:ok"},
		{"nobin,ok", nil, true, "nobin:not_found ok:ok"},
		{"no-such-bundle,ok", nil, true, "no-such-bundle:not_found ok:ok"},
		{"f-quota,f-unknown", nil, false, "f-quota:quota f-unknown:unknown"},
		// Stop: neither retry nor fallback.
		{"f-authentication,ok", nil, false, "f-authentication:authentication"},
		{"f-validation,ok", nil, false, "f-validation:validation"},
		{"f-configuration,ok", nil, false, "f-configuration:configuration"},
		{"jsonerr,ok", nil, false, "jsonerr:authentication"},
	}
	for _, c := range cases {
		t.Run(c.providers, func(t *testing.T) {
			a, r := env.ask(c.providers, c.extra...)
			if a.OK != c.ok || a.attempts() != c.attempts {
				t.Fatalf("ok=%v attempts %q, want ok=%v %q\n%s%s", a.OK, a.attempts(), c.ok, c.attempts, r.stdout, r.stderr)
			}
			if c.ok != (r.code == 0) {
				t.Fatalf("exit %d", r.code)
			}
			if c.ok && a.Content != "answer from "+a.Provider+": what is up?" {
				t.Fatalf("content %q", a.Content)
			}
			if !c.ok && (a.Error == nil || a.Error.Category == "") {
				t.Fatalf("no error: %+v", a)
			}
			// The rate limit's named wait is reported with its retry and fallback answers.
			if first := a.Attempts[0]; c.providers == "flaky,ok" && (first.RetryAfterMS != 20 || !first.ShouldRetry || first.ShouldFallback) {
				t.Fatalf("rate limit attempt: %+v", first)
			}
		})
	}
	// The text form prints only the answer, and the attempts on stderr.
	r := env.run("", "ask", "--workspace", env.ws, "--audit", os.DevNull, "--providers", "f-quota,ok", "hello", "there")
	if r.code != 0 || r.stdout != "answer from ok: hello there\n" || !strings.Contains(r.stderr, "f-quota attempt 1: quota; falling back") {
		t.Fatalf("text ask: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = env.run("from stdin", "ask", "--workspace", env.ws, "--audit", os.DevNull, "--providers", "f-authentication", "-")
	if r.code != 1 || !strings.Contains(r.stderr, "f-authentication: authentication:") {
		t.Fatalf("text ask failure: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestAskOutputFormats reads every event shape from a provider through the host.
func TestAskOutputFormats(t *testing.T) {
	env := newProviderEnv(t,
		fakeSpec{id: "p-text", format: "text", parse: "text"},
		fakeSpec{id: "p-json", format: "json", parse: "json"},
		fakeSpec{id: "p-claude", format: "claude", parse: "stream-json"},
		fakeSpec{id: "p-codex", format: "codex", parse: "stream-json"},
		fakeSpec{id: "p-gemini", format: "gemini", parse: "stream-json"},
		fakeSpec{id: "p-ax", format: "ax", parse: "stream-json"})
	usage := map[string][2]int{"p-json": {11, 7}, "p-claude": {21, 9}, "p-codex": {31, 5}, "p-gemini": {41, 6}}
	for _, id := range []string{"p-text", "p-json", "p-claude", "p-codex", "p-gemini", "p-ax"} {
		a, r := env.ask(id)
		if !a.OK || a.Content != "answer from "+id+": what is up?" {
			t.Errorf("%s: %+v\n%s", id, a, r.stderr)
			continue
		}
		u, reported := usage[id]
		if reported && (a.Estimated || a.Usage.InputTokens != u[0] || a.Usage.OutputTokens != u[1]) {
			t.Errorf("%s: usage %+v estimated %v, want %v", id, a.Usage, a.Estimated, u)
		}
		if !reported && (!a.Estimated || a.Usage.InputTokens != 3 || a.Usage.OutputTokens != (len(a.Content)+3)/4) {
			t.Errorf("%s: estimated usage %+v (%v)", id, a.Usage, a.Estimated)
		}
	}
}

// TestHealthAndOutputCommands checks `health` (binary, version, probe) and `output parse|classify`.
func TestHealthAndOutputCommands(t *testing.T) {
	env := newProviderEnv(t, fakeSpec{id: "ok", format: "claude", parse: "stream-json"}, fakeSpec{id: "nobin", bin: "no-such-provider-cli"},
		fakeSpec{id: "f-quota", fail: "quota"})
	var rep struct {
		Healthy, Binary bool
		VersionOK       bool `json:"version_ok"`
		Version, Answer string
		Error           *struct{ Code string }
		Probe           *struct{ OK bool }
	}
	decode := func(r result) {
		t.Helper()
		rep.Error, rep.Probe = nil, nil
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("health: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
	}
	r := env.run("", "health", "ok", "--json", "--workspace", env.ws, "--audit", os.DevNull, "--probe")
	decode(r)
	if r.code != 0 || !rep.Healthy || !rep.Binary || !rep.VersionOK || rep.Version != "1.0.0" || rep.Probe == nil || !rep.Probe.OK ||
		rep.Answer != "answer from ok: Reply with the single word: ok" {
		t.Fatalf("healthy: exit %d %+v", r.code, rep)
	}
	r = env.run("", "health", "nobin", "--json", "--workspace", env.ws, "--audit", os.DevNull)
	decode(r)
	if r.code != 1 || rep.Healthy || rep.Binary || rep.Error == nil || rep.Error.Code != "not_installed" {
		t.Fatalf("missing binary: exit %d %+v", r.code, rep)
	}
	r = env.run("", "health", "f-quota", "--workspace", env.ws, "--audit", os.DevNull, "--probe")
	if r.code != 1 || !strings.Contains(r.stdout, "probe    quota") {
		t.Fatalf("failing probe: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = env.run("{\"type\":\"turn.started\"}\n{\"type\":\"content\",\"content\":\"Hello! \"}\n{\"type\":\"content\",\"content\":\"How can I help?\"}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"output_tokens\":8}}\n",
		"output", "parse", "--format", "stream-json")
	var parsed map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &parsed); err != nil || r.code != 0 || parsed["content"] != "Hello! How can I help?" || parsed["estimated"] != false ||
		fmt.Sprint(parsed["usage"]) != "map[input_tokens:10 output_tokens:8]" {
		t.Fatalf("output parse: exit %d %v\n%s", r.code, err, r.stdout)
	}
	r = env.run("HTTP 429 Too Many Requests: retry after 30 seconds", "output", "classify")
	if r.code != 0 || strings.Join(strings.Fields(r.stdout), " ") != `{ "category": "rate_limit", "should_retry": true, "should_fallback": false, "retry_after_ms": 30000 }` {
		t.Fatalf("output classify: exit %d\n%s", r.code, r.stdout)
	}
	if r = env.run("x", "output", "parse", "--format", "xml"); r.code != 2 {
		t.Fatalf("unknown format: exit %d", r.code)
	}
}
