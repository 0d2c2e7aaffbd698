package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/internal/fixture"
)

// TestDaemonSetupLoginSurviveKill9 takes a bundle through setup (a secret persisted to the CLI's
// environment) and login (completes_when reads a flag file) with clihostctl against the daemon,
// SIGKILLs the daemon and finds both still done after a restart.
func TestDaemonSetupLoginSurviveKill9(t *testing.T) {
	if _, err := lookSystem("jq"); err != nil {
		fixture.Missing(t, "jq is not installed: %v", err)
	}
	flag := filepath.Join(t.TempDir(), "logged-in.json")
	writeFile(t, flag, "false")
	// The login command tries to read a file the bundle does not declare: it runs sandboxed.
	secret := filepath.Join(t.TempDir(), "secret.txt")
	writeFile(t, secret, "TOP-SECRET-LOGIN")
	dir := t.TempDir()
	writeAcct(t, dir, flag, secret)
	state := t.TempDir()
	d := startDaemon(t, state, "--bundles", dir)
	ws := []string{"--workspace", d.ws} // set up for the daemon's own workspace, as an operator does for its MCP agents
	if st := d.status(t, "acct"); st.Ready || !strings.Contains(st.Reason, "clihostctl setup acct") {
		t.Fatalf("before setup: %+v", st)
	}
	if r := d.ctl(t, append([]string{"call", "acct", "whoami"}, ws...)...); r.code != 1 || !strings.Contains(r.stdout, "setup_required") {
		t.Fatalf("call before setup: exit %d %s", r.code, r.stdout)
	}
	if r := d.ctl(t, append([]string{"setup", "acct"}, ws...)...); r.code == 0 || !strings.Contains(r.stderr, "--value token=VALUE") {
		t.Fatalf("setup without an answer and no terminal: exit %d %s", r.code, r.stderr)
	}
	if r := d.ctl(t, append([]string{"setup", "acct", "--value", "token=s3cret-token-123"}, ws...)...); r.code != 0 || !strings.Contains(r.stdout, "token") {
		t.Fatalf("setup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := d.ctl(t, append([]string{"call", "acct", "whoami"}, ws...)...); r.code != 1 || !strings.Contains(r.stdout, "auth_required") || !strings.Contains(r.stdout, "clihostctl login acct") {
		t.Fatalf("call before login: exit %d %s", r.code, r.stdout)
	}
	if r := d.ctl(t, append([]string{"login", "acct", "--wait", "2s"}, ws...)...); r.code != 1 || !strings.Contains(r.stderr, "login") {
		t.Fatalf("login not confirmed: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	writeFile(t, flag, "true")
	if r := d.ctl(t, append([]string{"login", "acct"}, ws...)...); r.code != 0 || !strings.Contains(r.stdout, "acct: authed") ||
		strings.Contains(r.stdout+r.stderr, "TOP-SECRET") || !strings.Contains(r.stderr, "the login command failed") {
		t.Fatalf("login: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := d.ctl(t, append([]string{"call", "acct", "whoami"}, ws...)...)
	if r.code != 0 || !strings.Contains(r.stdout, `"value": "16\n"`) {
		t.Fatalf("call after setup and login: exit %d %s", r.code, r.stdout)
	}
	raw, _ := os.ReadFile(filepath.Join(state, "state.db"))
	audit, _ := os.ReadFile(filepath.Join(state, "audit.jsonl"))
	if strings.Contains(string(raw), "s3cret-token-123") || strings.Contains(string(audit), "s3cret-token-123") {
		t.Fatal("the setup secret is stored or logged in plaintext")
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = d.proc.Wait()
	d2 := startDaemon(t, state, "--bundles", dir, "--workspace", d.ws) // the same workspace again
	ws2 := []string{"--workspace", d.ws}
	if st := d2.status(t, "acct"); !st.Ready {
		t.Fatalf("after kill -9 and restart: %+v", st)
	}
	if r := d2.ctl(t, append([]string{"logout", "acct"}, ws2...)...); r.code != 0 || !strings.Contains(r.stdout, "unauthed") {
		t.Fatalf("logout: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	var res control.AuthResult
	if r := d2.ctl(t, append([]string{"logout", "acct", "--json"}, ws2...)...); r.code != 0 ||
		json.Unmarshal([]byte(r.stdout), &res) != nil || res.Phase != "unauthed" || res.Error != nil {
		t.Fatalf("logout --json: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := d2.ctl(t, append([]string{"call", "acct", "whoami"}, ws2...)...); !strings.Contains(r.stdout, "auth_required") {
		t.Fatalf("call after logout: %s", r.stdout)
	}
}

// writeAcct writes into dir the bundle acct: jq standing in for a CLI that needs a token at setup
// (its tool whoami prints the token's length) and a login, whose command reads secret (a file the
// bundle does not declare: it runs sandboxed) and which completes when flag holds true.
func writeAcct(t *testing.T, dir, flag, secret string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "acct", "CLI.md"), `---
name: Account CLI
id: acct
description: A CLI that needs a token at setup and a login (jq stands in for it).
version: 1.0.0
bin: jq
install: [{ method: apt, package: jq }]
version_check: { cmd: "jq --version", parse: 'jq-(\d+\.\d+(?:\.\d+)?)', range: ">=1.5" }
setup:
  - { id: token, kind: prompt, type: secret, prompt: "API token", persist: { env: ACCT_TOKEN } }
auth:
  login: { cmd: "jq -R . `+secret+`", interactive: true, completes_when: { cmd: "jq -e . `+flag+`", exit_code: 0 } }
  expiry: { detect: "exit_code:5" }
sandbox:
  network: { egress: [] }
  fs: { read: ["`+flag+`"], write: [] }
  exec: { allow: false }
  env: { pass: [] }
commands:
  whoami: ./tools/whoami/TOOL.md
---
`)
	writeFile(t, filepath.Join(dir, "acct", "tools", "whoami", "TOOL.md"), `---
name: Who am I
id: acct.whoami
description: Prints the token's length.
version: 1.0.0
inputs: { type: object, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [-n, -r, "env.ACCT_TOKEN | length"] }
---
`)
}
