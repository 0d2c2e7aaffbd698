package clihost

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/daemon"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
)

// lsDefinition is fixture.LS defined in Go: ls with the tool list, whose argv template puts the
// input path right after -1, an option that takes no value (issue 12's injection). edit, when not
// nil, changes the tool first.
func lsDefinition(tb testing.TB, edit ...func(*manifest.Tool)) *Definition {
	tb.Helper()
	tool := lsTool()
	for _, f := range edit {
		f(&tool)
	}
	d := DefineCli(lsCLI(), "", DefineTool("list", tool, ""))
	if d.err != nil {
		tb.Fatal(d.err)
	}
	return d
}

// lsCLI is lsDefinition's CLI.md.
func lsCLI() manifest.CLI {
	return manifest.CLI{
		Name: "Fixture ls", ID: "ls", Version: "1.0.0", Bin: "ls", Description: "ls as a bundle defined in Go, for tests.",
		Install:      []manifest.InstallMethod{{Method: manifest.MethodApt, Package: "coreutils"}},
		VersionCheck: manifest.VersionCheck{Cmd: "ls --version", Parse: `ls \(GNU coreutils\) (\d+\.\d+)`, Range: ">=8"},
		Sandbox: manifest.Sandbox{Network: &manifest.Network{Egress: []string{}}, FS: &manifest.FS{Read: []string{"./**"}, Write: []string{}},
			Exec: &manifest.Exec{Allow: new(false)}, Env: &manifest.Env{Pass: []string{}}},
	}
}

// lsTool is lsDefinition's TOOL.md.
func lsTool() manifest.Tool {
	return manifest.Tool{Name: "List", ID: "ls.list", Version: "1.0.0", Description: "One name a line.",
		Inputs: map[string]any{"type": "object", "additionalProperties": false, "required": []any{"path"},
			"properties": map[string]any{"path": map[string]any{"type": "string"}}},
		Outputs: map[string]any{"type": "string"},
		Runner:  &manifest.ToolRunner{Argv: []string{"-1", "${input.path}"}},
	}
}

// writeDefinition writes d's files into dir/<id>, as a bundle folder on disk.
func writeDefinition(tb testing.TB, d *Definition, dir string) {
	tb.Helper()
	for name, f := range d.files {
		p := filepath.Join(dir, d.cli.ID, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// pair is the same bundle served by the Go API and by clihostd's engine (in this process, with its
// own state directory), over one workspace given to the agent user.
type pair struct {
	api *Host
	d   *daemon.Engine
	ws  string
}

func newPair(t *testing.T, d *Definition) pair {
	t.Helper()
	fixture.NeedRoot(t)
	fixture.Need(t, "ls")
	bundles := t.TempDir()
	writeDefinition(t, d, bundles)
	fixture.Reachable(t, bundles)
	state := t.TempDir()
	fixture.Reachable(t, state)
	ws := fixture.Workspace(t)
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "sub", "a.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	e, err := daemon.New(context.Background(), slog.New(slog.DiscardHandler), daemon.Config{StateDir: state, Socket: filepath.Join(state, "clihostd.sock"),
		Bundles: []string{bundles}, NoCatalog: true, Workspace: ws, EgressPorts: "443", EgressMaxConns: daemon.DefaultEgressMaxConns,
		AuditMaxSize: host.AuditMaxSize, AuditKeep: host.AuditKeep, Approvals: filepath.Join(t.TempDir(), "approvals.yaml"), Version: "test"})
	if err != nil {
		t.Fatalf("daemon.New: %v", err)
	}
	t.Cleanup(e.Close)
	api, err := New(context.Background(), WithDefinitions(d), WithWorkspace(ws), WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	return pair{api: api, d: e, ws: ws}
}

// call sends raw (an agent's JSON) through both; it fails the test unless they agree on the result
// (everything but the duration).
func (p pair) call(t *testing.T, tool, raw string) Result {
	t.Helper()
	ctx := context.Background()
	in, err := argv.DecodeInput([]byte(raw))
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	viaDaemon := p.d.Call(ctx, control.CallRequest{Bundle: "ls", Tool: tool, Workspace: p.ws}, in, control.Caller{Workspace: p.ws, User: "root"})
	viaAPI, err := p.api.Call(ctx, "ls", tool, []byte(raw), CallOptions{})
	var e *Error
	if viaAPI.OK != (err == nil) || (err != nil && (!errors.As(err, &e) || e.Code != viaAPI.Error.Code || e.Detail != viaAPI.Error)) {
		t.Errorf("%s: the API's error %v does not carry its envelope's %+v", raw, err, viaAPI.Error)
	}
	viaDaemon.MS, viaAPI.MS = 0, 0
	if !reflect.DeepEqual(viaDaemon, viaAPI) {
		t.Errorf("%s: through the daemon %+v (%+v), through the API %+v (%+v)", raw, viaDaemon, viaDaemon.Error, viaAPI, viaAPI.Error)
	}
	return viaAPI
}

// TestDefinedToolRefusesInjectedOptions: a bundle defined in code whose argv template puts an input
// where an option is read (-1 takes no value, so the next word is a positional ls would parse as an
// option) gets the same lint warning as on disk, and every option an agent's value smuggles in is
// refused with input_invalid before anything runs, exactly as clihostd refuses it.
func TestDefinedToolRefusesInjectedOptions(t *testing.T) {
	p := newPair(t, lsDefinition(t))
	fs := p.api.Lint().Findings
	if len(fs) != 1 || fs[0].Rule != "argv-option-value" {
		t.Fatalf("findings %v, want the argv-option-value warning", fs)
	}
	for _, v := range []string{`"--version"`, `"-la"`, `"-R /"`, `"--help"`, `"--pre=/bin/sh"`, `"-"`, `"--hide=*"`} {
		env := p.call(t, "list", `{"path": `+v+`}`)
		if env.OK || env.Error.Code != errcode.InputInvalid || env.Error.Pointer != "/path" {
			t.Errorf("%s: %+v %+v, want input_invalid at /path", v, env, env.Error)
		}
	}
	if env := p.call(t, "list", `{"path": "a\u0000b"}`); env.OK || env.Error.Code != errcode.InputInvalid {
		t.Errorf("a NUL: %+v %+v, want input_invalid", env, env.Error)
	}
	// Positive control: an ordinary value runs ls in the sandbox.
	if env := p.call(t, "list", `{"path": "sub"}`); !env.OK || env.Value != "a.txt\n" {
		t.Fatalf("ls -1 sub: %#v %+v", env.Value, env.Error)
	}
}

// TestSchemaFailures: input that fails the tool's schema is refused with the daemon's error
// (code, message, pointer, hint), and nothing runs.
func TestSchemaFailures(t *testing.T) {
	p := newPair(t, lsDefinition(t))
	for _, raw := range []string{`{}`, `{"path": 5}`, `{"path": ["sub"]}`, `{"path": "sub", "extra": 1}`, `{"path": null}`} {
		env := p.call(t, "list", raw)
		if env.OK || env.Error.Code != errcode.InputInvalid {
			t.Errorf("%s: %+v %+v, want input_invalid", raw, env, env.Error)
		}
	}
	// Not an object at all: refused as the daemon's front ends refuse it (argv.DecodeInput).
	for _, raw := range []string{`[1]`, `"sub"`, `{"path": "sub"} {}`, `{"path": `} {
		var e *Error
		if env, err := p.api.Call(context.Background(), "ls", "list", []byte(raw), CallOptions{}); env.OK || !errors.As(err, &e) || e.Code != errcode.InputInvalid {
			t.Errorf("%s: %+v %v, want input_invalid", raw, env, err)
		}
	}
	if env := p.call(t, "nosuch", `{}`); env.OK || env.Error.Code != errcode.NotFound {
		t.Errorf("no such tool: %+v", env.Error)
	}
}

// TestFSBundleCannotLeave: a bundle from an fs.FS whose references leave its folder (../ in the
// commands block, in a TOOL.md's runner.cli, an absolute path) has lint errors and is never served;
// the same files on disk are refused by the loader the same way.
func TestFSBundleCannotLeave(t *testing.T) {
	cli := strings.Replace(fixture.CLI("ls", "ls", "  list: ../outside/TOOL.md\n  abs: /etc/TOOL.md\n  up: ./tools/up/TOOL.md\n"), "read: []", `read: ["./**"]`, 1)
	tool := fixture.LS()["ls/tools/list/TOOL.md"]
	files := fstest.MapFS{
		"b/CLI.md":               {Data: []byte(cli)},
		"outside/TOOL.md":        {Data: []byte(tool)},
		"b/tools/up/TOOL.md":     {Data: []byte(strings.Replace(tool, "../../CLI.md", "../../../b/CLI.md", 1))},
		"b/tools/list/TOOL.md":   {Data: []byte(tool)},
		"b/tools/list/README.md": {Data: []byte("x")},
	}
	h, err := New(context.Background(), WithBundleFS("hostile", files), WithWorkspace(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := h.Lint()
	if r.Errors == 0 || len(r.Bundles) != 1 || r.Bundles[0].Served {
		t.Fatalf("lint: %+v", r)
	}
	var e *Error
	if _, err := h.Bundle("ls"); !errors.As(err, &e) || e.Code != errcode.BundleInvalid {
		t.Errorf("Bundle: %v, want bundle_invalid", err)
	}
	env, err := h.Call(context.Background(), "ls", "list", map[string]any{"path": "."}, CallOptions{})
	if env.OK || !errors.As(err, &e) || e.Code != errcode.BundleInvalid {
		t.Errorf("Call: %+v %v, want bundle_invalid", env, err)
	}
	// The same files on disk: the same rules fire (positions aside).
	dir := t.TempDir()
	for name, f := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	onDisk, err := Lint(WithBundleDirs(filepath.Join(dir, "b")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rules(r.Findings), rules(onDisk.Findings); !reflect.DeepEqual(got, want) {
		t.Errorf("rules from the fs.FS %v, from disk %v", got, want)
	}
}

func rules(fs manifest.Findings) []string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Severity)+" "+f.Rule)
	}
	return out
}

// TestDefinitionCannotLeave: a definition cannot name files outside its own: a command word that is
// a path is refused by New, and a runner.cli leaving the bundle is a lint error (not served).
func TestDefinitionCannotLeave(t *testing.T) {
	for _, cmd := range []string{"../x", "a/b", "..", "a \\x"} {
		tool := DefineTool(cmd, manifest.Tool{ID: "ls.x", Runner: &manifest.ToolRunner{Argv: []string{"x"}}}, "")
		if _, err := New(context.Background(), WithDefinitions(DefineCli(lsCLI(), "", tool))); err == nil || !strings.Contains(err.Error(), "is not a name") {
			t.Errorf("command %q: %v, want refused", cmd, err)
		}
	}
	tool := manifest.Tool{Name: "List", ID: "ls.list", Version: "1.0.0", Description: "One name a line.",
		Inputs: map[string]any{"type": "object"}, Outputs: map[string]any{"type": "string"},
		Runner: &manifest.ToolRunner{CLI: "../../../../etc/CLI.md", Argv: []string{"."}}}
	h, err := New(context.Background(), WithDefinitions(DefineCli(lsCLI(), "", DefineTool("list", tool, ""))), WithWorkspace(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var e *Error
	if r := h.Lint(); r.Errors == 0 || r.Bundles[0].Served {
		t.Errorf("lint: %+v", r)
	}
	if _, err := h.Call(context.Background(), "ls", "list", nil, CallOptions{}); !errors.As(err, &e) || e.Code != errcode.BundleInvalid {
		t.Errorf("Call: %v, want bundle_invalid", err)
	}
}

// TestAgentUser: a root program's CLIs run as WithAgentUser's user in a workspace it may use, and
// root is refused as that user.
func TestAgentUser(t *testing.T) {
	fixture.NeedRoot(t)
	if _, err := New(context.Background(), WithAgentUser("root")); err == nil || !strings.Contains(err.Error(), "never run as root") {
		t.Errorf("agent user root: %v", err)
	}
	u := fixture.User(t, "clihost-t-embed")
	ws := t.TempDir() // root's, 0700: by default the call would be nobody's
	fixture.Reachable(t, ws)
	h, err := New(context.Background(), WithCatalog(), WithWorkspace(ws), WithAgentUser(u.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	env, err := h.Call(context.Background(), "jq", "eval", map[string]any{"json": "1", "filter": "."}, CallOptions{})
	var e *Error
	if !errors.As(err, &e) || e.Code != errcode.WorkspaceDenied || !strings.Contains(e.Message, u.Name) {
		t.Fatalf("root's 0700 workspace: %+v %v, want workspace_denied naming %s", env, err, u.Name)
	}
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	if env, err := h.Call(context.Background(), "jq", "eval", map[string]any{"json": "1", "filter": "."}, CallOptions{}); err != nil || env.Value != "1\n" {
		t.Fatalf("jq as %s: %+v %v", u.Name, env, err)
	}
}

// TestApproval: a tool whose approval class asks for one fails with approval_required and the
// pending approval's id; once answered, the same call runs, and a denied one stays refused.
func TestApproval(t *testing.T) {
	fixture.Need(t, "ls")
	def := lsDefinition(t, func(tool *manifest.Tool) { tool.Approval = "always" })
	ws := fixture.Workspace(t)
	h, err := New(context.Background(), WithDefinitions(def), WithWorkspace(ws))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	call := func() (Result, *Error) {
		env, err := h.Call(ctx, "ls", "list", map[string]any{"path": "."}, CallOptions{})
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("not a *Error: %v", err)
		}
		return env, e
	}
	for _, approve := range []bool{false, true} {
		_, e := call()
		if e == nil || e.Code != errcode.ApprovalRequired || e.Detail.Approval == nil {
			t.Fatalf("unapproved: %v, want approval_required", e)
		}
		if err := h.AnswerApproval(e.Detail.Approval.ID, approve, "the test"); err != nil {
			t.Fatal(err)
		}
		env, e := call()
		if approve != env.OK || !approve && (e == nil || e.Code != errcode.ApprovalDenied) {
			t.Errorf("answered %v: %+v %v", approve, env, e)
		}
	}
}

// TestDefinitionValuesStayValues: the values of a definition are data in its CLI.md and TOOL.md,
// never markup: a description or body carrying frontmatter delimiters and YAML keys cannot change
// the bin, the sandbox or the argv; and a tool whose steps run another program than the bundle's
// bin, not allowed by exec.spawn, is a lint error, never served.
func TestDefinitionValuesStayValues(t *testing.T) {
	const evil = "x\n---\nbin: sh\nsandbox: {fs: {read: [\"/**\"]}}\n---\n"
	cli, tool := lsCLI(), lsTool()
	cli.Description, cli.Name = evil, "{bin: sh}"
	tool.Description, tool.Name = evil, "a: b\n---"
	h, err := New(context.Background(), WithDefinitions(DefineCli(cli, evil, DefineTool("list", tool, evil))), WithWorkspace(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	b, err := h.reg.Get("ls")
	if err != nil {
		t.Fatal(err)
	}
	if b.CLI.Bin != "ls" || b.CLI.Description != evil || b.CLI.Sandbox.FS == nil || !reflect.DeepEqual(b.CLI.Sandbox.FS.Read, []string{"./**"}) ||
		len(b.Tools) != 1 || b.Tools[0].Tool == nil || b.Tools[0].Tool.Description != evil || !reflect.DeepEqual(b.Tools[0].Tool.Runner.Argv, []string{"-1", "${input.path}"}) {
		t.Errorf("loaded %+v", b.CLI)
	}

	spawn := lsDefinition(t, func(tool *manifest.Tool) {
		tool.Runner = &manifest.ToolRunner{Steps: []manifest.ToolStep{{Bin: "/bin/sh", Argv: []string{"-c", "id"}}}}
	})
	h2, err := New(context.Background(), WithDefinitions(spawn), WithWorkspace(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	var e *Error
	if fs := rules(h2.Lint().Findings); !reflect.DeepEqual(fs, []string{"error step-bin"}) {
		t.Errorf("findings %v, want step-bin", fs)
	}
	if _, err := h2.Call(context.Background(), "ls", "list", map[string]any{"path": "."}, CallOptions{}); !errors.As(err, &e) || e.Code != errcode.BundleInvalid {
		t.Errorf("Call: %v, want bundle_invalid", err)
	}
}
