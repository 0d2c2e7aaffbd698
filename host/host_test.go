package host

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/registry"
)

func catalogHost(t *testing.T) (*Host, *bytes.Buffer) {
	t.Helper()
	reg, err := registry.Load(registry.EmbeddedSource())
	if err != nil {
		t.Fatal(err)
	}
	var audit bytes.Buffer
	return New(reg, Options{Audit: &audit}), &audit
}

func bundle(t *testing.T, h *Host, name string) *manifest.Bundle {
	t.Helper()
	b, err := h.Bundle(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func js(t *testing.T, s string) map[string]any {
	t.Helper()
	m := map[string]any{}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// writeBundle writes files (relative path → content; executable when the path is under a bin/
// folder) into a new directory and returns a Host over it.
func writeBundle(t testing.TB, files map[string]string, opts Options) (*Host, string) {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		mode := os.FileMode(0o644)
		if strings.Contains(p, "/bin/") {
			mode = 0o755
		}
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), mode); err != nil {
			t.Fatal(err)
		}
	}
	reg := fixture.Load(t, dir)
	for _, f := range reg.AllFindings() {
		t.Fatalf("test bundle: %s", f)
	}
	return New(reg, opts), dir
}

// echoBundle runs jq so that the value of input v comes back as a JSON string, verbatim.
func echoBundle(bin, rng string, extraCLI string) map[string]string {
	return map[string]string{
		"echo/CLI.md": `---
name: Echo through jq
id: echo
description: Returns its input, through jq.
version: 1.0.0
bin: ` + bin + `
install: [{ method: apt, package: jq }]
version_check: { cmd: "` + bin + ` --version", parse: 'jq-(\d+\.\d+(?:\.\d+)?)', range: "` + rng + `" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: false }
  env: { pass: [HOME, ECHO_TOKEN] }
` + extraCLI + `commands:
  echo: ./tools/echo/TOOL.md
  env: ./tools/env/TOOL.md
  raw: ./tools/raw/TOOL.md
---
`,
		"echo/tools/echo/TOOL.md": `---
name: Echo
id: echo.echo
description: Echo v.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { v: { type: string }, n: { type: integer, default: 7 } }, required: [v] }
outputs: { type: object, properties: { v: { type: string }, n: { type: integer } }, required: [v, n] }
runner:
  cli: ../../CLI.md
  argv: [-n, --arg, v, "${input.v}", --argjson, n, "${input.n}", "{v: $v, n: $n}"]
  output: { format: json }
---
`,
		"echo/tools/env/TOOL.md": `---
name: Env
id: echo.env
description: Print the token from the environment.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [-n, -r, "env.ECHO_TOKEN"] }
---
`,
		"echo/tools/raw/TOOL.md": `---
name: Raw
id: echo.raw
description: Prints text but claims JSON.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [-n, -r, '"not json"'], output: { format: json } }
---
`,
	}
}

func TestCallJQ(t *testing.T) {
	fixture.Need(t, "jq")
	h, audit := catalogHost(t)
	b := bundle(t, h, "jq")
	ws := fixture.Workspace(t)
	env := h.Call(context.Background(), b, "eval", js(t, `{"json": "{\"a\": [1, 2, 3]}", "filter": ".a | length"}`), Caller{Workspace: ws, User: "u"}, CallOptions{})
	if !env.OK || env.Value != "3\n" || *env.ExitCode != 0 {
		t.Fatalf("eval: %+v %+v", env, env.Error)
	}
	var rec Invoked
	if err := json.Unmarshal(audit.Bytes(), &rec); err != nil {
		t.Fatalf("audit %q: %v", audit.String(), err)
	}
	if rec.Type != "cli.invoked" || rec.CLIID != "jq" || rec.ToolID != "jq.eval" || rec.ArgvCount == 0 || !strings.Contains(rec.ArgvTemplate, "${input.json}") ||
		rec.BinaryVersion == "" || rec.UserID != "u" || !strings.HasPrefix(rec.WorkspaceID, "w_") || !rec.OK || *rec.ExitCode != 0 {
		t.Fatalf("audit record %+v", rec)
	}
	if strings.Contains(audit.String(), ".a | length") || strings.Contains(audit.String(), ws) {
		t.Fatalf("audit holds input values or paths: %s", audit.String())
	}

	// A jq error: exit 5 is named by the bundle; stderr is carried.
	env = h.Call(context.Background(), b, "eval", js(t, `{"json": "{}", "filter": "error(\"boom\")"}`), Caller{Workspace: ws}, CallOptions{})
	if env.OK || env.Error.Code != "runtime_or_input_error" || !strings.Contains(env.Error.Stderr, "boom") || *env.Error.ExitCode != 5 {
		t.Fatalf("jq error: %+v", env.Error)
	}
}

func TestInputValidationAndDefaults(t *testing.T) {
	fixture.Need(t, "jq")
	h, _ := writeBundle(t, echoBundle("jq", ">=1.5", ""), Options{})
	b := bundle(t, h, "echo")
	ws := fixture.Workspace(t)
	env := h.Call(context.Background(), b, "echo", js(t, `{"v": "x"}`), Caller{Workspace: ws}, CallOptions{})
	got, _ := json.Marshal(env.Value)
	if !env.OK || string(got) != `{"n":7,"v":"x"}` {
		t.Fatalf("default not applied: %s %+v", got, env.Error)
	}
	for in, ptr := range map[string]string{`{}`: "", `{"v": 3}`: "/v", `{"v": "x", "n": "seven"}`: "/n", `{"v": "x", "extra": 1}`: ""} {
		env := h.Call(context.Background(), b, "echo", js(t, in), Caller{Workspace: ws}, CallOptions{})
		if env.OK || env.Error.Code != "input_invalid" || env.Error.Pointer != ptr || env.Error.Hint == "" {
			t.Errorf("%s: %+v", in, env.Error)
		}
	}
	if env := h.Call(context.Background(), b, "nope", nil, Caller{Workspace: ws}, CallOptions{}); env.Error.Code != "not_found" || !strings.Contains(env.Error.Hint, "echo") {
		t.Fatalf("unknown tool: %+v", env.Error)
	}
	if env := h.Call(context.Background(), b, "raw", nil, Caller{Workspace: ws}, CallOptions{}); env.Error.Code != "output_parse_failed" {
		t.Fatalf("raw text as JSON: %+v", env.Error)
	}
}

// TestInjectionCorpus sends hostile values through a real process: each comes back byte for byte or
// is refused, and nothing is executed.
func TestInjectionCorpus(t *testing.T) {
	fixture.Need(t, "jq")
	h, _ := writeBundle(t, echoBundle("jq", ">=1.5", ""), Options{})
	b := bundle(t, h, "echo")
	ws := fixture.Workspace(t)
	canary := filepath.Join(ws, "PWNED")
	corpus := []string{
		"; touch PWNED", "| touch PWNED", "&& touch PWNED", "$(touch PWNED)", "`touch PWNED`", "> PWNED",
		"<(touch PWNED)", "a\ntouch PWNED", "a\r\ntouch PWNED", "tab\there", "'single' \"double\" \\back",
		"${input.v}", "$HOME $PATH", "*", "~", "\u202eevil\u202c", "emoji 🎉 中文", "sh -c 'touch PWNED'", "env touch PWNED",
		"--output=PWNED", "-n", "--", "-", "--help",
	}
	for _, v := range corpus {
		in := map[string]any{"v": v}
		env := h.Call(context.Background(), b, "echo", in, Caller{Workspace: ws}, CallOptions{})
		if strings.HasPrefix(v, "-") {
			if env.OK || env.Error.Code != "input_invalid" {
				t.Errorf("%q: leading dash in a positional slot was not refused: %+v", v, env)
			}
			continue
		}
		m, _ := env.Value.(map[string]any)
		if !env.OK || m["v"] != v {
			t.Errorf("%q came back as %#v (%+v)", v, env.Value, env.Error)
		}
	}
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("a value was executed: PWNED exists")
	}
	env := h.Call(context.Background(), b, "echo", map[string]any{"v": "a\x00b"}, Caller{Workspace: ws}, CallOptions{})
	if env.OK || env.Error.Code != "input_invalid" {
		t.Fatalf("NUL: %+v", env)
	}
}

func TestGate(t *testing.T) {
	fixture.Need(t, "jq")
	h, _ := writeBundle(t, echoBundle("no-such-binary-xyz", ">=1.5", ""), Options{})
	env := h.Call(context.Background(), bundle(t, h, "echo"), "echo", js(t, `{"v": "x"}`), Caller{Workspace: fixture.Workspace(t)}, CallOptions{})
	if env.Error == nil || env.Error.Code != "not_installed" || !strings.Contains(env.Error.Hint, "apt-get install jq") {
		t.Fatalf("missing binary: %+v", env.Error)
	}
	h, _ = writeBundle(t, echoBundle("jq", ">=99", ""), Options{})
	env = h.Call(context.Background(), bundle(t, h, "echo"), "echo", js(t, `{"v": "x"}`), Caller{Workspace: fixture.Workspace(t)}, CallOptions{})
	if env.Error == nil || env.Error.Code != "version_mismatch" || !strings.Contains(env.Error.Message, `outside the range ">=99"`) {
		t.Fatalf("old binary: %+v", env.Error)
	}
	// A vendored binary inside the bundle folder wins over PATH.
	jq, _ := exec.LookPath("jq")
	data, err := os.ReadFile(jq)
	if err != nil {
		t.Fatal(err)
	}
	files := echoBundle("myjq", ">=1.5", "")
	files["echo/CLI.md"] = strings.Replace(files["echo/CLI.md"], "install: [{ method: apt, package: jq }]", "install: [{ method: vendored, path: ./bin/myjq }]", 1)
	files["echo/bin/myjq"] = string(data)
	h, _ = writeBundle(t, files, Options{})
	env = h.Call(context.Background(), bundle(t, h, "echo"), "echo", js(t, `{"v": "vendored"}`), Caller{Workspace: fixture.Workspace(t)}, CallOptions{})
	if !env.OK {
		t.Fatalf("vendored: %+v", env.Error)
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	fixture.Need(t, "jq")
	files := echoBundle("jq", ">=1.5", "auth:\n  state: { env: [ECHO_TOKEN] }\n")
	lookup := withPATH("ECHO_TOKEN", "tok-123456")
	h, _ := writeBundle(t, files, Options{LookupEnv: lookup})
	env := h.Call(context.Background(), bundle(t, h, "echo"), "env", nil, Caller{Workspace: fixture.Workspace(t)}, CallOptions{})
	if !env.OK || env.Value != "[REDACTED]\n" {
		t.Fatalf("token reached the result: %#v %+v", env.Value, env.Error)
	}
}

func TestTimeoutCancelAndProgress(t *testing.T) {
	fixture.Need(t, "sleep")
	h, _ := writeBundle(t, fixture.Sleep(500), Options{ProgressEvery: 50 * time.Millisecond})
	b := bundle(t, h, "sleep")
	ticks := 0
	env := h.Call(context.Background(), b, "nap", js(t, `{"s": "30"}`), Caller{Workspace: fixture.Workspace(t)}, CallOptions{Progress: func(time.Duration) { ticks++ }})
	if env.OK || env.Error.Code != "timeout" || !env.Error.Retryable {
		t.Fatalf("timeout: %+v", env.Error)
	}
	if ticks == 0 {
		t.Fatal("no progress reported while the call ran")
	}
	// Cancel once the call runs its program (the first progress tick), not after a fixed time: a
	// cancel during the version check is another failure (version_mismatch).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h2, _ := writeBundle(t, fixture.Sleep(60000), Options{ProgressEvery: 50 * time.Millisecond})
	env = h2.Call(ctx, bundle(t, h2, "sleep"), "nap", js(t, `{"s": "30"}`), Caller{Workspace: fixture.Workspace(t)}, CallOptions{Progress: func(time.Duration) { cancel() }})
	if env.OK || env.Error.Code != "cancelled" {
		t.Fatalf("cancel: %+v", env.Error)
	}
}

func TestRipgrepAndGit(t *testing.T) {
	fixture.Need(t, "rg", "git")
	h, _ := catalogHost(t)
	ws := fixture.Workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("alpha\nneedle here\nomega\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := h.Call(context.Background(), bundle(t, h, "rg"), "search", js(t, `{"pattern": "needle"}`), Caller{Workspace: ws}, CallOptions{})
	if !env.OK || !strings.Contains(env.Value.(string), "notes.txt:2:needle here") {
		t.Fatalf("rg search: %#v %+v", env.Value, env.Error)
	}
	env = h.Call(context.Background(), bundle(t, h, "rg"), "search", js(t, `{"pattern": "absent-word"}`), Caller{Workspace: ws}, CallOptions{})
	if env.OK || env.Error.Code != "no_match" {
		t.Fatalf("rg no match: %+v", env)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "notes.txt"}} {
		cmd := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	fixture.GiveToAgent(t, ws)
	env = h.Call(context.Background(), bundle(t, h, "git"), "status", js(t, `{}`), Caller{Workspace: ws}, CallOptions{})
	if !env.OK || !strings.Contains(env.Value.(string), "A  notes.txt") {
		t.Fatalf("git status: %#v %+v", env.Value, env.Error)
	}
}
