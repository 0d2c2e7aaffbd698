package host

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/output"
	"github.com/clihost/clihost/runner"
)

// TestCallTimeoutOptionAndPartialStdout: CallOptions.Timeout shortens a call's limit but never
// lengthens it, and a call stopped at its limit keeps the start of what it printed (at most
// maxPartialStdout bytes, cut at a line end): tail -f prints a workspace file, then waits for
// more, in the real sandbox.
func TestCallTimeoutOptionAndPartialStdout(t *testing.T) {
	fixture.Need(t, "tail", "sleep")
	files := map[string]string{
		"tailf/CLI.md": strings.Replace(fixture.CLI("tail", "tailf", "  say: ./tools/say/TOOL.md\n"), `fs: { read: [], write: [] }`, `fs: { read: ["./**"], write: [] }`, 1),
		"tailf/tools/say/TOOL.md": `---
name: Say
id: tailf.say
description: Print notes.txt and wait for more.
version: 1.0.0
inputs: { type: object, properties: {} }
outputs: { type: string }
timeout_ms: 60000
runner: { cli: ../../CLI.md, argv: ["-f", "notes.txt"] }
---
`,
	}
	h, _ := writeBundle(t, files, Options{})
	ws := fixture.Workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("part one\npart two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := h.Call(context.Background(), bundle(t, h, "tailf"), "say", map[string]any{}, Caller{Workspace: ws}, CallOptions{Timeout: 400 * time.Millisecond})
	if env.OK || env.Error.Code != errcode.Timeout || !strings.Contains(env.Error.Message, "within 400ms") {
		t.Fatalf("want a timeout after 400ms: %+v", env.Error)
	}
	if p := env.Error.PartialStdout; p != "part one\npart two\n" {
		t.Fatalf("partial stdout: %q", p)
	}
	// Never lengthened: the tool's own limit (here runner.limits' 300 ms) wins over a longer option.
	sleep := fixture.Sleep(60000)
	sleep["sleep/CLI.md"] = strings.Replace(sleep["sleep/CLI.md"], "sandbox:\n", "runner: { limits: { timeout_ms: 300 } }\nsandbox:\n", 1)
	h2, _ := writeBundle(t, sleep, Options{})
	env = h2.Call(context.Background(), bundle(t, h2, "sleep"), "nap", js(t, `{"s": "30"}`), Caller{Workspace: fixture.Workspace(t)}, CallOptions{Timeout: time.Hour})
	if env.OK || env.Error.Code != errcode.Timeout || !strings.Contains(env.Error.Message, "within 300ms") || env.Error.PartialStdout != "" {
		t.Fatalf("want the tool's 300ms: %+v", env.Error)
	}
}

// TestPartialStdoutBound: at most maxPartialStdout bytes, cut at the last line end within them.
func TestPartialStdoutBound(t *testing.T) {
	line := []byte("0123456789abcde\n")
	big := bytes.Repeat(line, 2*maxPartialStdout/len(line))
	got := partialStdout(big)
	if len(got) > maxPartialStdout || !strings.HasSuffix(got, "\n") || len(got) < maxPartialStdout-len(line) {
		t.Fatalf("%d bytes", len(got))
	}
	if got := partialStdout([]byte("short")); got != "short" {
		t.Fatalf("%q", got)
	}
}

// TestPartialStdoutRedactedBeforeTheCut: a secret the call's output holds across the
// maxPartialStdout cut (no line end before it) must not leave in part: the start of an API key is
// most of the key. tail -f prints a workspace file whose first line is longer than the bound, in
// the real sandbox, and the token is the bundle's auth state (redacted in whatever a call returns).
func TestPartialStdoutRedactedBeforeTheCut(t *testing.T) {
	fixture.Need(t, "tail")
	const secret = "sk-live-0123456789abcdefghijklmnopqrstuvwxyz"
	cli := strings.Replace(fixture.CLI("tail", "tailf", "  say: ./tools/say/TOOL.md\n"), `fs: { read: [], write: [] }`, `fs: { read: ["./**"], write: [] }`, 1)
	cli = strings.Replace(cli, "sandbox:\n", "auth:\n  state: { env: [TAILF_TOKEN] }\nsandbox:\n", 1)
	files := map[string]string{
		"tailf/CLI.md": cli,
		"tailf/tools/say/TOOL.md": `---
name: Say
id: tailf.say
description: Print notes.txt and wait for more.
version: 1.0.0
inputs: { type: object, properties: {} }
outputs: { type: string }
timeout_ms: 60000
runner: { cli: ../../CLI.md, argv: ["-f", "notes.txt"] }
---
`,
	}
	lookup := withPATH("TAILF_TOKEN", secret)
	h, _ := writeBundle(t, files, Options{LookupEnv: lookup})
	ws := fixture.Workspace(t)
	notes := append(bytes.Repeat([]byte("x"), maxPartialStdout-len(secret)/2), secret+" and more\n"...)
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), notes, 0o644); err != nil {
		t.Fatal(err)
	}
	env := h.Call(context.Background(), bundle(t, h, "tailf"), "say", map[string]any{}, Caller{Workspace: ws}, CallOptions{Timeout: 2 * time.Second})
	if env.OK || env.Error.Code != errcode.Timeout {
		t.Fatalf("want a timeout: %+v", env.Error)
	}
	p := env.Error.PartialStdout
	if len(p) > maxPartialStdout || !strings.HasPrefix(p, "xxxx") {
		t.Fatalf("partial stdout: %d bytes", len(p))
	}
	if half := secret[:len(secret)/2]; strings.Contains(p, half[:8]) {
		t.Fatalf("the partial stdout ends with the start of the secret: %q", p[len(p)-40:])
	}
}

// TestStderrRedactedBeforeTheExcerpt: a failed call carries the last MaxStderrInError bytes of its
// stderr; a secret that starts before that cut must not leave as its end. bash's printf (a
// builtin: nothing is executed) writes the input to stderr and fails, in the real sandbox, and the
// token is the bundle's auth state. Also the message (the last lines) and a secret whole.
func TestStderrRedactedBeforeTheExcerpt(t *testing.T) {
	fixture.Need(t, "bash")
	const secret = "sk-live-0123456789abcdefghijklmnopqrstuvwxyz"
	files := map[string]string{
		"berr/CLI.md": `---
name: Bash error
id: berr
description: Print the input to stderr and fail.
version: 1.0.0
bin: bash
install: [{ method: apt, package: bash }]
version_check: { cmd: "bash --version", parse: 'version (\d+\.\d+\.\d+)', range: ">=4" }
auth:
  state: { env: [BERR_TOKEN] }
sandbox:
  network: { egress: [] }
  fs: { read: [], write: [] }
  exec: { allow: false }
  env: { pass: [] }
commands:
  fail: ./tools/fail/TOOL.md
---
`,
		"berr/tools/fail/TOOL.md": `---
name: Fail
id: berr.fail
description: Print s to stderr and exit 1.
version: 1.0.0
inputs: { type: object, properties: { s: { type: string } }, required: [s] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["-c", "printf '%s' \"$1\" >&2; exit 1", "berr", "${input.s}"] }
---
`,
	}
	lookup := withPATH("BERR_TOKEN", secret)
	reg := fixture.Load(t, fixture.Write(t, files))
	h := New(reg, Options{LookupEnv: lookup})
	// The excerpt is the last 4 KiB: the secret starts 20 bytes before it.
	s := "error: " + secret + strings.Repeat("y", output.MaxStderrInError-len(secret)+20)
	env := h.Call(context.Background(), bundle(t, h, "berr"), "fail", map[string]any{"s": s}, Caller{Workspace: fixture.Workspace(t)}, CallOptions{})
	if env.OK || env.Error.ExitCode == nil || *env.Error.ExitCode != 1 {
		t.Fatalf("want exit 1: %+v", env.Error)
	}
	if tail := secret[20:]; strings.Contains(env.Error.Stderr, tail[:12]) || strings.Contains(env.Error.Message, tail[:12]) {
		t.Fatalf("the stderr excerpt starts with the end of the secret: %q", env.Error.Stderr[:60])
	}
}

// TestCutOutputEndsWithoutASecret: the host keeps the first 10 MiB of a stream (runner.DefaultLimit)
// and discards the rest; a secret across that cut must not leave as its start. cat prints a
// workspace file whose secret straddles the limit, in the real sandbox, and succeeds (truncated).
func TestCutOutputEndsWithoutASecret(t *testing.T) {
	fixture.Need(t, "cat")
	const secret = "sk-live-0123456789abcdefghijklmnopqrstuvwxyz"
	cli := strings.Replace(fixture.CLI("cat", "catf", "  show: ./tools/show/TOOL.md\n"), `fs: { read: [], write: [] }`, `fs: { read: ["./**"], write: [] }`, 1)
	cli = strings.Replace(cli, "sandbox:\n", "auth:\n  state: { env: [CATF_TOKEN] }\nsandbox:\n", 1)
	files := map[string]string{
		"catf/CLI.md": cli,
		"catf/tools/show/TOOL.md": `---
name: Show
id: catf.show
description: Print notes.txt.
version: 1.0.0
inputs: { type: object, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["notes.txt"] }
---
`,
	}
	lookup := withPATH("CATF_TOKEN", secret)
	h, _ := writeBundle(t, files, Options{LookupEnv: lookup})
	ws := fixture.Workspace(t)
	notes := append(bytes.Repeat([]byte("x"), runner.DefaultLimit-len(secret)/2), secret+" and more\n"...)
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), notes, 0o644); err != nil {
		t.Fatal(err)
	}
	env := h.Call(context.Background(), bundle(t, h, "catf"), "show", map[string]any{}, Caller{Workspace: ws}, CallOptions{})
	v, _ := env.Value.(string)
	if !env.OK || !env.Truncated || !strings.HasPrefix(v, "xxxx") {
		t.Fatalf("want a cut success: ok=%v truncated=%v %d bytes %+v", env.OK, env.Truncated, len(v), env.Error)
	}
	if strings.Contains(v, secret[:8]) {
		t.Fatalf("the cut output ends with the start of the secret: %q", v[len(v)-40:])
	}
}

// withPATH is a LookupEnv that knows the host's PATH and the variable name, set to value.
func withPATH(name, value string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		switch k {
		case name:
			return value, true
		case "PATH":
			return os.Getenv("PATH"), true
		}
		return "", false
	}
}
