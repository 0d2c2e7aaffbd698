package host

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/authstate"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/setup"
	"github.com/clihost/clihost/store"
)

// TestSetupAndAuthGateCalls drives a bundle through setup (a secret persisted to the environment)
// and login (completes_when reads a flag file), then detects expiry from an exit code.
func TestSetupAndAuthGateCalls(t *testing.T) {
	fixture.Need(t, "jq")
	flag := filepath.Join(t.TempDir(), "logged-in.json")
	if err := os.WriteFile(flag, []byte("false"), 0o644); err != nil {
		t.Fatal(err)
	}
	extra := `setup:
  - { id: token, kind: prompt, type: secret, prompt: "Token", persist: { env: ECHO_TOKEN } }
auth:
  login: { cmd: "jq -n 1", interactive: true, completes_when: { cmd: "jq -e . ` + flag + `", exit_code: 0 } }
  expiry: { detect: "exit_code:5" }
`
	files := echoBundle("jq", ">=1.5", extra)
	files["echo/tools/fail/TOOL.md"] = `---
name: Fail
id: echo.fail
description: Fails with exit code 5, as the CLI does when its login expired.
version: 1.0.0
inputs: { type: object, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [-n, 'error("expired")'] }
---
`
	files["echo/CLI.md"] = strings.Replace(files["echo/CLI.md"], "  raw: ./tools/raw/TOOL.md\n", "  raw: ./tools/raw/TOOL.md\n  fail: ./tools/fail/TOOL.md\n", 1)
	engine := setupEngine(t)
	var audit bytes.Buffer
	machine := &authstate.Machine{Store: engine.Store, Audit: func(v any) { audit.WriteString("cli.auth_expired\n") }}
	h, _ := writeBundle(t, files, Options{Setup: engine, Auth: machine})
	b := bundle(t, h, "echo")
	ws := fixture.Workspace(t)
	caller := Caller{Workspace: ws, User: "alice"}
	call := func(tool string) Envelope {
		return h.Call(context.Background(), b, tool, map[string]any{}, caller, CallOptions{})
	}

	if env := call("env"); env.OK || env.Error.Code != "setup_required" || !strings.Contains(env.Error.Message, "token") || !strings.Contains(env.Error.Hint, "clihostctl setup echo") {
		t.Fatalf("before setup: %+v", env.Error)
	}
	scope := lifecycle.Scope{Bundle: b.Key(), Workspace: ws, User: "alice"}
	jq, _ := h.resolve(b)
	lenv := lifecycle.Env{BinPath: jq, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"}}
	if _, err := engine.Run(context.Background(), b, scope, lenv, nil, setup.RunOptions{Values: map[string]string{"token": "tok-secret-42"}}); err != nil {
		t.Fatal(err)
	}
	if env := call("env"); env.OK || env.Error.Code != "auth_required" || !strings.Contains(env.Error.Hint, "clihostctl login echo") {
		t.Fatalf("before login: %+v", env.Error)
	}
	if err := os.WriteFile(flag, []byte("true"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := machine.Login(context.Background(), b, scope, lenv, func(context.Context, []string) error { return nil }); err != nil || s.Phase != authstate.Authed {
		t.Fatalf("login: %+v %v", s, err)
	}
	env := call("env")
	if !env.OK || env.Value != "[REDACTED]\n" {
		t.Fatalf("after setup and login, the persisted token reaches the CLI and not the result: %#v %+v", env.Value, env.Error)
	}
	if env := call("fail"); env.OK || env.Error.Code != "auth_required" || !strings.Contains(audit.String(), "cli.auth_expired") {
		t.Fatalf("expiry: %+v, audit %q", env.Error, audit.String())
	}
	if s, _ := machine.Get(b, scope); s.Phase == authstate.Authed {
		t.Fatal("still authed after the expiry exit code")
	}
}

// setupEngine is a setup engine on a fresh state store (closed when t ends) and a fresh
// secrets key.
func setupEngine(t *testing.T) *setup.Engine {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	secrets, err := store.OpenSecrets(st, filepath.Join(t.TempDir(), "key"))
	if err != nil {
		t.Fatal(err)
	}
	return &setup.Engine{Store: st, Secrets: secrets}
}
