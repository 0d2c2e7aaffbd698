package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/bundles"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// authorBundle is a bundle "probe" whose vendored binary is a shell script: asked for its version
// it prints one, and whatever it is asked it leaves a file "ran" in its working directory first
// (so a test sees whether any process of it started), then prints MODE's output.
func authorBundle(t *testing.T, outputs, example string) (bundleDir, ws string) {
	t.Helper()
	dir := fixture.Write(t, map[string]string{
		"probe/CLI.md": `---
name: Probe
id: probe
description: A script that says when it ran, for tests.
version: 1.0.0
bin: probe
install: [{ method: vendored, path: bin/probe }]
version_check: { cmd: "probe --version", parse: 'probe (\d+\.\d+\.\d+)', range: ">=1" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: ["./**"] }
  exec: { allow: false }
  env: { pass: [PROBE_TOKEN], set: { PROBE_MODE: "set-value-not-shown" } }
auth: { state: { env: [PROBE_TOKEN] } }
commands:
  say: ./tools/say/TOOL.md
---
`,
		"probe/tools/say/TOOL.md": `---
name: Say
id: probe.say
description: Prints what it is told.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { word: { type: string } }, required: [word] }
outputs: ` + outputs + `
risk_level: 0
mutates: []
examples:
` + example + `
runner: { cli: ../../CLI.md, argv: ["say", "${input.word}"], output: { format: json } }
---
`,
		"probe/bin/probe": `#!/bin/sh
: > ran
if [ "$1" = --version ]; then echo "probe 1.2.3"; exit 0; fi
printf '[1, "%s", "%s"]\n' "$2" "$PROBE_TOKEN"
`,
	})
	if err := os.Chmod(filepath.Join(dir, "probe/bin/probe"), 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.Reachable(t, filepath.Join(dir, "probe", "bin"))
	for _, p := range []string{"probe", "probe/bin", "probe/tools", "probe/tools/say"} {
		os.Chmod(filepath.Join(dir, p), 0o755)
	}
	return filepath.Join(dir, "probe"), fixture.Workspace(t)
}

func sandboxOrSkip(t *testing.T) {
	t.Helper()
	fixture.NeedSandbox(t, host.SandboxAvailable())
}

// TestCallDryRunRunsNothing: --dry-run prints the argv, the environment's names (never a value),
// the uid, the cwd and the policy, and starts no process of the CLI, not even its version check.
func TestCallDryRunRunsNothing(t *testing.T) {
	sandboxOrSkip(t)
	t.Setenv("PROBE_TOKEN", "tok-very-secret-1234")
	dir, ws := authorBundle(t, "{ type: array }", "  - { name: hello, input: { word: hi } }")
	code, out, errOut := runCtl(t, "call", "--bundles", dir, "--workspace", ws, "--audit", "-", "probe", "say", "--dry-run", "--input", `{"word":"x; rm -rf /"}`)
	if code != 0 {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"argv:     " + filepath.Join(dir, "bin/probe") + " say 'x; rm -rf /'", "cwd:      " + ws, "uid:", "PROBE_MODE", "PROBE_TOKEN", "egress: none", "nothing was run", ws} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{"set-value-not-shown", "tok-very-secret-1234"} {
		if strings.Contains(out+errOut, secret) {
			t.Errorf("dry run shows the value %q:\n%s", secret, out)
		}
	}
	code, out, _ = runCtl(t, "call", "--bundles", dir, "--workspace", ws, "--audit", "-", "probe", "say", "--dry-run", "--json", "--input", `{"word":"hi"}`)
	var d host.DryRun
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 0 {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
	if d.Argv[len(d.Argv)-1] != "hi" || d.Cwd != ws || d.Policy == nil || len(d.Policy.Write) == 0 || d.Policy.Write[0] != ws || len(d.Policy.Egress) != 0 {
		t.Errorf("dry run = %+v", d)
	}
	if os.Geteuid() == 0 && d.UID != fixture.AgentID {
		t.Errorf("uid %d, want the workspace's owner %d", d.UID, fixture.AgentID)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Fatal("a dry run started the CLI (its version check or the tool)")
	}
	// Bad input is the call's error, and still nothing runs.
	if code, _, errOut := runCtl(t, "call", "--bundles", dir, "--workspace", ws, "probe", "say", "--dry-run", "--input", `{"nope":1}`); code == 0 || !strings.Contains(errOut, "input_invalid") {
		t.Fatalf("invalid input: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Fatal("a dry run started the CLI")
	}
}

// TestCallDebugShowsWhatTheCLIPrinted: an output that does not match the outputs schema says so,
// and with --debug the error carries what the CLI printed, secrets redacted.
func TestCallDebugShowsWhatTheCLIPrinted(t *testing.T) {
	sandboxOrSkip(t)
	t.Setenv("PROBE_TOKEN", "tok-very-secret-1234")
	dir, ws := authorBundle(t, "{ type: object }", "  - { name: hello, input: { word: hi } }")
	code, out, errOut := runCtl(t, "call", "--bundles", dir, "--workspace", ws, "--audit", "-", "probe", "say", "--debug", "--input", `{"word":"hello"}`)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	var env struct {
		Error struct {
			Code  string
			Debug *struct{ Stdout, Stderr string }
		}
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatal(err)
	}
	if env.Error.Code != "output_invalid" || env.Error.Debug == nil || !strings.Contains(env.Error.Debug.Stdout, `[1, "hello", "`) {
		t.Fatalf("envelope = %s", out)
	}
	if strings.Contains(out+errOut, "tok-very-secret-1234") {
		t.Fatalf("--debug shows a secret:\n%s", out)
	}
	// Without --debug, nothing of the output (the agent's view).
	_, out, _ = runCtl(t, "call", "--bundles", dir, "--workspace", ws, "--audit", "-", "probe", "say", "--input", `{"word":"hello"}`)
	if strings.Contains(out, `"debug"`) {
		t.Fatalf("debug without --debug: %s", out)
	}
}

// TestTestCommand: examples pass and fail as their outputs say, in a workspace seeded from the
// bundle's testdata; TAP and JSON; a testdata symlink out of the bundle is refused.
func TestTestCommand(t *testing.T) {
	sandboxOrSkip(t)
	examples := `  - { name: matches, input: { word: hi }, output: [1, "hi", ""] }
  - { name: differs, input: { word: hi }, output: [2] }
  - { name: no expectation, input: { word: yo } }`
	dir, _ := authorBundle(t, "{ type: array }", examples)
	fixture.WriteIn(t, dir, map[string]string{"testdata/seed.txt": "x"})
	code, out, errOut := runCtl(t, "test", dir, "--audit", "-", "--format", "tap")
	if code != 1 || !strings.Contains(out, "1..3\nok 1 - say: matches\nnot ok 2 - say: differs\n") || !strings.Contains(out, "ok 3 - say: no expectation") {
		t.Fatalf("tap: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCtl(t, "test", dir, "--audit", "-", "--json")
	var rep testReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || rep.Passed != 2 || rep.Failed != 1 || rep.Bundle != "probe@1" {
		t.Fatalf("json: exit %d %v\n%s", code, err, out)
	}
	// A symbolic link in testdata never copies a host file into the workspace.
	if err := os.Symlink("/etc/shadow", filepath.Join(dir, "testdata", "shadow")); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCtl(t, "test", dir, "--audit", "-")
	if code != 1 || !strings.Contains(out, "not a regular file") {
		t.Fatalf("symlink fixture: exit %d\n%s", code, out)
	}
	// Nor does a hard link (os.Root does not stop one): a file of the host linked into testdata,
	// such as /etc/shadow where fs.protected_hardlinks is 0, would be copied for the CLI to read.
	if err := os.Remove(filepath.Join(dir, "testdata", "shadow")); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(filepath.Dir(dir), "host-secret")
	if err := os.WriteFile(host, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(host, filepath.Join(dir, "testdata", "linked")); err != nil {
		t.Skipf("no hard link beside the bundle: %v", err)
	}
	code, out, _ = runCtl(t, "test", dir, "--audit", "-")
	if code != 1 || !strings.Contains(out, "hard link") {
		t.Fatalf("hard-linked fixture: exit %d\n%s", code, out)
	}
}

// TestCatalogExamples runs clihostctl test over every catalog bundle whose tools ship a fixture
// (tools/<tool>/testdata, or the bundle's testdata): such a bundle's examples run offline, and must
// pass; the approval policy allows ffmpeg, whose every tool writes its output file. Every other
// bundle's examples need the network: clihostctl test skips each, with the reason, and exits 0.
func TestCatalogExamples(t *testing.T) {
	sandboxOrSkip(t)
	t.Chdir(t.TempDir())
	t.Setenv("CLIHOST_BUNDLES", "")
	policy := fixture.Write(t, map[string]string{"approvals.yaml": "rules:\n  - { bundle: ffmpeg, decision: allow }\n"})
	approvals := filepath.Join(policy, "approvals.yaml")
	tools, _ := fs.Glob(bundles.FS(), "*/tools/*/testdata")
	shared, _ := fs.Glob(bundles.FS(), "*/testdata")
	seen := map[string]bool{}
	for _, f := range append(tools, shared...) {
		id := strings.Split(f, "/")[0]
		if seen[id] {
			continue
		}
		seen[id] = true
		fixture.Need(t, id)
		code, out, errOut := runCtl(t, "test", id, "--audit", "-", "--approvals", approvals, "--json")
		var rep testReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Passed == 0 {
			t.Errorf("clihostctl test %s: exit %d %v\n%s%s", id, code, err, out, errOut)
		}
		for _, r := range rep.Results { // a fixture says the examples run offline: none may be skipped as needing the network
			if strings.Contains(r.Reason, "needs the network") {
				t.Errorf("%s %s: %s skipped: %s", id, r.Tool, r.Example, r.Reason)
			}
		}
	}
	for _, id := range []string{"jq", "rg", "git", "ffmpeg"} {
		if !seen[id] {
			t.Errorf("the %s bundle has no example fixture", id)
		}
	}
	ids, _ := fs.Glob(bundles.FS(), "*/CLI.md")
	for _, f := range ids {
		if id := strings.Split(f, "/")[0]; !seen[id] {
			catalogSkips(t, id, approvals)
		}
	}
}

// catalogSkips checks that clihostctl test runs none of bundle id's examples (they need the
// network) and says why for each.
func catalogSkips(t *testing.T, id, approvals string) {
	t.Helper()
	code, out, errOut := runCtl(t, "test", id, "--audit", "-", "--approvals", approvals, "--json")
	var rep testReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Passed+rep.Failed != 0 {
		t.Errorf("clihostctl test %s: exit %d %v\n%s%s", id, code, err, out, errOut)
		return
	}
	for _, r := range rep.Results {
		if !strings.Contains(r.Reason, "needs the network") {
			t.Errorf("%s %s: %s skipped for %q", id, r.Tool, r.Example, r.Reason)
		}
	}
}

// TestDryRunIsWhatRuns: the argv and the environment's names a dry run shows are those the CLI
// then gets (a script prints its arguments and its exported variables' names).
func TestDryRunIsWhatRuns(t *testing.T) {
	sandboxOrSkip(t)
	dir, ws := authorBundle(t, "{ type: string }", "  - { name: hello, input: { word: hi } }")
	tool := filepath.Join(dir, "tools/say/TOOL.md")
	data, _ := os.ReadFile(tool)
	edited := strings.Replace(string(data), `argv: ["say", "${input.word}"], output: { format: json }`,
		`argv: ["say", "--word=${input.word}", "${input.word}", "two words", ""], output: { format: text }`, 1)
	if err := os.WriteFile(tool, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "bin/probe")
	if err := os.WriteFile(script, []byte(`#!/bin/sh
if [ "$1" = --version ]; then echo "probe 1.2.3"; exit 0; fi
for a in "$@"; do printf 'arg=%s\n' "$a"; done
export -p
`), 0o755); err != nil {
		t.Fatal(err)
	}
	input := `{"word":"it's"}`
	code, out, errOut := runCtl(t, "call", "--bundles", dir, "--workspace", ws, "--audit", "-", "probe", "say", "--dry-run", "--json", "--input", input)
	var d host.DryRun
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 0 {
		t.Fatalf("dry run: exit %d %v\n%s%s", code, err, out, errOut)
	}
	code, out, errOut = runCtl(t, "call", "--bundles", dir, "--workspace", ws, "--audit", "-", "probe", "say", "--input", input)
	var env struct {
		OK    bool
		Value string
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || !env.OK {
		t.Fatalf("call: exit %d %v\n%s%s", code, err, out, errOut)
	}
	var args, names []string
	for l := range strings.Lines(env.Value) {
		l = strings.TrimSuffix(l, "\n")
		if a, ok := strings.CutPrefix(l, "arg="); ok {
			args = append(args, a)
		} else if n, ok := strings.CutPrefix(l, "export "); ok {
			if n, _, _ = strings.Cut(n, "="); n != "PWD" && n != "OLDPWD" {
				names = append(names, n)
			}
		}
	}
	if len(args) != 5 || args[1] != "--word=it's" || len(names) < 3 {
		t.Fatalf("the CLI printed %q", env.Value)
	}
	if strings.Join(args, "\x00") != strings.Join(d.Argv[1:], "\x00") {
		t.Errorf("argv: dry run %q, the CLI got %q", d.Argv[1:], args)
	}
	if strings.Join(names, ",") != strings.Join(d.Env, ",") {
		t.Errorf("env: dry run %v, the CLI got %v", d.Env, names)
	}
}
