package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// secretBundle is a bundle whose CLI is jq, printing the variables named in expr from its
// environment ($ENV), with auth.ref naming inventory (written as SECRETS.md when not empty).
func secretBundle(t *testing.T, dir, id, inventory, expr string) {
	t.Helper()
	ref := ""
	if inventory != "" {
		ref = "auth: { ref: ./SECRETS.md }\n"
		writeFile(t, filepath.Join(dir, id, "SECRETS.md"), inventory)
	}
	writeFile(t, filepath.Join(dir, id, "CLI.md"), `---
name: `+id+` CLI
id: `+id+`
description: jq stands in for a CLI that reads its credentials from its environment.
version: 1.0.0
bin: jq
install: [{ method: apt, package: jq }]
version_check: { cmd: "jq --version", parse: 'jq-(\d+\.\d+(?:\.\d+)?)', range: ">=1.5" }
`+ref+`sandbox:
  network: { egress: [] }
  fs: { read: [], write: [] }
  exec: { allow: false }
  env: { pass: [] }
output: { default_format: json }
commands:
  show: ./tools/show/TOOL.md
---
`)
	writeFile(t, filepath.Join(dir, id, "tools", "show", "TOOL.md"), `---
name: Show
id: `+id+`.show
description: Prints what the CLI got in its environment.
version: 1.0.0
inputs: { type: object, properties: {} }
outputs: { type: object }
runner: { cli: ../../CLI.md, argv: [-n, -c, '`+expr+`'] }
---
`)
}

// ctlIn runs clihostctl against d with stdin.
func (d *daemonProc) ctlIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin.ctl, append([]string{"--socket", d.socket}, args...)...)
	cmd.Env = append(os.Environ(), "CLIHOST_BUNDLES=")
	cmd.Stdin = strings.NewReader(stdin)
	o, err := fixture.Run(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return result{o.Code, o.Stdout, o.Stderr}
}

// TestSecretsInventoryEndToEnd: a bundle's SECRETS.md binds VAULT_TOKEN; until the operator sets
// it the bundle is not ready and calls are refused with the command that sets it; once set (from
// standard input, through the daemon), a real call's CLI receives it in its environment and the
// result shows it redacted; another bundle's call never sees it; the value is in neither the
// audit log, the state database, the daemon's log nor any clihostctl output; secret list shows
// names and set/unset only.
func TestSecretsInventoryEndToEnd(t *testing.T) {
	if _, err := lookSystem("jq"); err != nil {
		fixture.Missing(t, "jq is not installed: %v", err)
	}
	const value = "vault-s3cret-9f8e7d6c5b4a"
	dir := t.TempDir()
	secretBundle(t, dir, "vault", `---
secrets:
  - slug: vault-token
    name: Vault token
    description: The token the vault CLI authenticates with.
  - slug: vault-region
    name: Region
    description: Optional region.
    metadata: { required: false }
---
`, `{token: $ENV.VAULT_TOKEN, region: $ENV.VAULT_REGION, home: ($ENV.HOME != null)}`)
	secretBundle(t, dir, "other", "", `{token: $ENV.VAULT_TOKEN, names: ($ENV | keys)}`)
	state := t.TempDir()
	d := startDaemon(t, state, "--bundles", dir)
	ws := []string{"--workspace", d.ws}

	if st := d.status(t, "vault"); st.Ready || !strings.Contains(st.Reason, "clihostctl secret set vault VAULT_TOKEN") {
		t.Fatalf("status before the secret is set: %+v", st)
	}
	r := d.ctl(t, append([]string{"call", "vault", "show"}, ws...)...)
	if r.code != 1 || !strings.Contains(r.stdout, "setup_required") || !strings.Contains(r.stdout, "clihostctl secret set vault VAULT_TOKEN") {
		t.Fatalf("call with the required secret unset: exit %d %s", r.code, r.stdout)
	}
	if r := d.ctl(t, append([]string{"secret", "list", "vault", "--json"}, ws...)...); r.code != 0 || !strings.Contains(r.stdout, `"set": false`) {
		t.Fatalf("secret list before: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := d.ctlIn(t, "x\n", append([]string{"secret", "set", "vault", "NOPE", "--stdin"}, ws...)...); r.code == 0 || !strings.Contains(r.stderr, "VAULT_TOKEN") {
		t.Fatalf("setting an undeclared secret: exit %d %s", r.code, r.stderr)
	}
	if r := d.ctlIn(t, "a\x00b", append([]string{"secret", "set", "vault", "VAULT_TOKEN", "--stdin"}, ws...)...); r.code == 0 || !strings.Contains(r.stderr, "NUL") {
		t.Fatalf("a value with a NUL byte: exit %d %s", r.code, r.stderr)
	}
	if r := d.ctlIn(t, "", append([]string{"secret", "set", "vault", "VAULT_TOKEN", "--stdin"}, ws...)...); r.code == 0 || !strings.Contains(r.stderr, "empty") {
		t.Fatalf("an empty value: exit %d %s", r.code, r.stderr)
	}
	r = d.ctlIn(t, value+"\n", append([]string{"secret", "set", "vault", "VAULT_TOKEN", "--stdin", "--json"}, ws...)...)
	var l struct {
		Secrets []struct {
			Slug string
			Env  []string
			Set  bool
		}
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil || len(l.Secrets) != 2 || !l.Secrets[0].Set || l.Secrets[1].Set || l.Secrets[0].Env[0] != "VAULT_TOKEN" {
		t.Fatalf("secret set: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if st := d.status(t, "vault"); !st.Ready {
		t.Fatalf("status after the secret is set: %+v", st)
	}

	r = d.ctl(t, append([]string{"call", "vault", "show"}, ws...)...)
	var env struct {
		OK    bool
		Value struct {
			Token  *string
			Region *string
			Home   bool
		}
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &env) != nil || !env.OK {
		t.Fatalf("call with the secret set: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if env.Value.Token == nil || *env.Value.Token != "[REDACTED]" {
		t.Fatalf("the CLI did not receive the secret, or the result shows it unredacted: %s", r.stdout)
	}
	if env.Value.Region != nil || !env.Value.Home {
		t.Fatalf("an unset optional secret must not be set, the sandbox's own HOME must stay: %s", r.stdout)
	}

	r = d.ctl(t, append([]string{"call", "other", "show"}, ws...)...)
	if r.code != 0 || !strings.Contains(r.stdout, `"token": null`) || strings.Contains(r.stdout, "VAULT_TOKEN") || strings.Contains(r.stdout, "REDACTED") {
		t.Fatalf("another bundle's call sees the secret: exit %d %s", r.code, r.stdout)
	}

	if r := d.ctl(t, append([]string{"secret", "list", "vault"}, ws...)...); r.code != 0 || !strings.Contains(r.stdout, "vault-token") || !strings.Contains(r.stdout, "set") {
		t.Fatalf("secret list: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	raw, _ := os.ReadFile(filepath.Join(state, "state.db"))
	audit, err := os.ReadFile(filepath.Join(state, "audit.jsonl"))
	if err != nil || !strings.Contains(string(audit), `"cli_id":"vault"`) {
		t.Fatalf("no audit line for the calls: %v\n%s", err, audit)
	}
	for what, text := range map[string]string{"state.db": string(raw), "audit log": string(audit), "daemon log": strings.Join(d.log.All(), "\n")} {
		if strings.Contains(text, value) {
			t.Fatalf("the secret's value is in the %s", what)
		}
	}

	if r := d.ctl(t, append([]string{"secret", "set", "vault", "vault-token", "--unset"}, ws...)...); r.code != 0 || !strings.Contains(r.stdout, "unset") {
		t.Fatalf("unset: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := d.ctl(t, append([]string{"call", "vault", "show"}, ws...)...); r.code != 1 || !strings.Contains(r.stdout, "setup_required") {
		t.Fatalf("call after unset: exit %d %s", r.code, r.stdout)
	}
}

// TestSecretsInventoryLintThroughCLI: clihostctl lint reports a hostile auth.ref (a path out of
// the bundle to /etc/shadow) at CLI.md's line and column, and the daemon does not serve it.
func TestSecretsInventoryLintThroughCLI(t *testing.T) {
	dir := t.TempDir()
	secretBundle(t, dir, "vault", "x", `{}`)
	cli := filepath.Join(dir, "vault", "CLI.md")
	src, _ := os.ReadFile(cli)
	writeFile(t, cli, strings.Replace(string(src), "ref: ./SECRETS.md", "ref: ../../../../../../../etc/shadow", 1))
	r := runBin(t, bin.ctl, "", "lint", dir)
	if r.code != 1 || !strings.Contains(r.stdout, "CLI.md:9:") || !strings.Contains(r.stdout, "bundle-file-outside") || !strings.Contains(r.stdout, "/etc/shadow") {
		t.Fatalf("lint of auth.ref to /etc/shadow: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	writeFile(t, cli, string(src)) // the inventory "x" has no frontmatter
	if r := runBin(t, bin.ctl, "", "lint", dir); r.code != 1 || !strings.Contains(r.stdout, "SECRETS.md:1:1: error: frontmatter-missing") {
		t.Fatalf("lint of an inventory without frontmatter: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestSecretsScopedToTheCaller: on a root daemon, a socket-group member may not list or set the
// secrets of a workspace it cannot use (workspace_denied, through the raw API, not only
// clihostctl); what it sets in its own workspace is its own: its calls get it, while root's calls
// in the same workspace do not (another user's scope) and are refused as unset.
func TestSecretsScopedToTheCaller(t *testing.T) {
	fixture.Need(t, "jq", "curl")
	fixture.NeedRoot(t)
	fixture.Group(t, sockGroup)
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "clihost-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	if err := os.Chmod(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	secretBundle(t, dir, "vault", "---\nsecrets:\n  - { slug: vault-token, name: Token, description: The token. }\n---\n", `{token: $ENV.VAULT_TOKEN}`)
	sock := filepath.Join(sockDir, "ctl.sock")
	d := startDaemon(t, t.TempDir(), "--socket", sock, "--group", sockGroup, "--bundles", dir)
	d.socket = sock
	owner := fixture.User(t, ownerName)
	member := fixture.User(t, memberName, sockGroup, shareGroup)
	victim := filepath.Join(owner.Home, "private")
	privateDir(t, victim, owner.UID, owner.GID, 0o700)

	for _, req := range [][2]string{
		{"/v1/secrets", `{"bundle": "vault", "workspace": "` + victim + `", "name": "VAULT_TOKEN", "value": "planted-value"}`},
		{"/v1/secrets?bundle=vault&workspace=" + victim, ""},
	} {
		if r := d.rawAs(t, member, req[0], req[1]); !strings.Contains(r.stdout, "workspace_denied") {
			t.Errorf("member: %s %s:\n%s", req[0], req[1], r.stdout)
		}
	}
	own := filepath.Join(member.Home, "project")
	privateDir(t, own, member.UID, member.GID, 0o700)
	const value = "member-s3cret-value-42"
	if r := d.rawAs(t, member, "/v1/secrets", `{"bundle": "vault", "workspace": "`+own+`", "name": "VAULT_TOKEN", "value": "`+value+`"}`); !strings.Contains(r.stdout, `"set":true`) || strings.Contains(r.stdout, value) {
		t.Fatalf("member sets its own secret: %s", r.stdout)
	}
	r := d.ctlAs(t, member, "call", "vault", "show", "--workspace", own)
	if r.code != 0 || !strings.Contains(r.stdout, `"token": "[REDACTED]"`) {
		t.Fatalf("member's call: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := d.ctl(t, "secret", "list", "vault", "--workspace", own, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"set": false`) {
		t.Fatalf("root's scope in the member's workspace must be its own: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := d.ctl(t, "call", "vault", "show", "--workspace", own); r.code != 1 || !strings.Contains(r.stdout, "setup_required") || strings.Contains(r.stdout, "REDACTED") {
		t.Fatalf("root's call in the member's workspace: exit %d %s", r.code, r.stdout)
	}
}
