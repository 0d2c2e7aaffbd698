package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/internal/agenttoken"
	"github.com/clihost/clihost/internal/fixture"
)

// stamp is a bundle "stamp" around touch(1) whose tool make (approval: always) creates a file in
// the workspace and whose tool release defers to the operator's policy "release".
func stamp() map[string]string {
	tool := func(id, approval string) string {
		return `---
name: ` + id + `
id: stamp.` + id + `
description: Touch a file in the workspace.
version: 1.0.0
approval: ` + approval + `
mutates: ["workspace:./**"]
inputs: { type: object, additionalProperties: false, properties: { name: { type: string, pattern: "^[a-z0-9-]+$" } }, required: [name] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["--", "${input.name}"] }
---
`
	}
	cli := strings.Replace(fixture.CLI("touch", "stamp", "  make: ./tools/make/TOOL.md\n  release: ./tools/release/TOOL.md\n"),
		`fs: { read: [], write: [] }`, `fs: { read: ["./**"], write: ["./**"] }`, 1)
	return map[string]string{
		"stamp/CLI.md":                cli,
		"stamp/tools/make/TOOL.md":    tool("make", "always"),
		"stamp/tools/release/TOOL.md": tool("release", "policy:release"),
	}
}

// call runs a tool of the engine's bundles through the control backend, as clihostctl call does.
func call(e *Engine, bundle, tool, name string) callresult.Envelope {
	return e.Call(context.Background(), control.CallRequest{Bundle: bundle, Tool: tool}, map[string]any{"name": name},
		control.Caller{User: e.user})
}

func exists(t *testing.T, e *Engine, name string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(e.workspace, name))
	return err == nil
}

func auditHas(t *testing.T, e *Engine, parts ...string) bool {
	t.Helper()
	raw, err := os.ReadFile(e.AuditFile())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all && line != "" {
			return true
		}
	}
	return false
}

// TestApprovalBackend: a call that needs an approval is refused with its id and listed pending; an
// operator's answer through the backend is audited and lets the same call run once; a denial
// refuses it; unknown and already answered ids are errors.
func TestApprovalBackend(t *testing.T) {
	e := testEngine(t, stamp(), nil)
	env := call(e, "stamp", "make", "first")
	if env.Error == nil || env.Error.Code != "approval_required" || env.Error.Approval == nil {
		t.Fatalf("call before approval: %+v", env.Error)
	}
	id := env.Error.Approval.ID
	pending := e.PendingApprovals()
	if len(pending) != 1 || pending[0].ID != id || pending[0].Bundle != "stamp" || !strings.Contains(pending[0].Input, `"first"`) {
		t.Fatalf("pending: %+v, want %s", pending, id)
	}
	if exists(t, e, "first") {
		t.Fatal("the tool ran before it was approved")
	}
	p, err := e.AnswerApproval(id, true, "operator-test")
	if err != nil || p.Answer != "approved" || p.By != "operator-test" {
		t.Fatalf("AnswerApproval: %+v, %v", p, err)
	}
	if !auditHas(t, e, `"type":"cli.approval"`, `"id":"`+id+`"`, `"answer":"approved"`, `"by":"operator-test"`) {
		t.Error("the answer is not in the audit log")
	}
	if _, err := e.AnswerApproval(id, false, "operator-test"); err == nil || !strings.Contains(err.Error(), "already approved") {
		t.Errorf("answering twice: %v", err)
	}
	if env := call(e, "stamp", "make", "first"); env.Error != nil || !exists(t, e, "first") {
		t.Fatalf("the approved call: %+v", env.Error)
	}
	if env := call(e, "stamp", "make", "first"); env.Error == nil || env.Error.Code != "approval_required" {
		t.Errorf("the approval was used twice: %+v", env.Error)
	}

	denied := call(e, "stamp", "make", "second").Error
	if denied == nil || denied.Approval == nil {
		t.Fatalf("second call: %+v", denied)
	}
	if _, err := e.AnswerApproval(denied.Approval.ID, false, "operator-test"); err != nil {
		t.Fatal(err)
	}
	if env := call(e, "stamp", "make", "second"); env.Error == nil || env.Error.Code != "approval_denied" || exists(t, e, "second") {
		t.Errorf("the denied call: %+v", env.Error)
	}
	if _, err := e.AnswerApproval("ap-000000000000", true, "operator-test"); err == nil {
		t.Error("answering an unknown id: no error")
	}
}

// TestReloadKeepsGenerationOnBadPolicy: a reload whose approval policy does not parse changes
// nothing (the same generation of bundles, the same policy, which still decides calls); a reload
// with a good policy swaps both.
func TestReloadKeepsGenerationOnBadPolicy(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "approvals.yaml")
	if err := os.WriteFile(policy, []byte("policies: { release: allow }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := testEngine(t, stamp(), func(c *Config) { c.Approvals = policy })
	before, pol := e.cur.Load(), e.approvals.Policy()
	if env := call(e, "stamp", "release", "one"); env.Error != nil {
		t.Fatalf("release under policy allow: %+v", env.Error)
	}
	if err := os.WriteFile(policy, []byte("policies: [ this is not a map\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.Reload(); err == nil {
		t.Fatal("Reload with a policy that does not parse: no error")
	}
	if e.cur.Load() != before || e.approvals.Policy() != pol {
		t.Fatal("a failed reload swapped the generation or the policy")
	}
	if env := call(e, "stamp", "release", "two"); env.Error != nil || !exists(t, e, "two") {
		t.Errorf("release after the failed reload: %+v", env.Error)
	}
	if err := os.WriteFile(policy, []byte("policies: { release: deny }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.Reload(); err != nil {
		t.Fatalf("Reload with a good policy: %v", err)
	}
	if e.cur.Load() == before || e.approvals.Policy() == pol {
		t.Error("a good reload kept the old generation or policy")
	}
	if env := call(e, "stamp", "release", "three"); env.Error == nil || exists(t, e, "three") {
		t.Errorf("release under policy deny ran: %+v", env)
	}
}

// TestTokenBackend: named agent tokens made and revoked through the backend are audited, open the
// MCP and metrics listener while they exist and not after; names are checked.
func TestTokenBackend(t *testing.T) {
	e := testEngine(t, stamp(), nil)
	h := e.httpHandler()
	get := func(token string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	def := e.Token()
	if def.Name != agenttoken.Default || def.Token == "" || def.TokenFile != filepath.Join(e.stateDir, "token") {
		t.Fatalf("default token: %+v", def)
	}
	if code := get(def.Token); code != http.StatusOK {
		t.Errorf("metrics with the default token: %d", code)
	}
	info, err := e.CreateToken("ci-bot")
	if err != nil || info.Name != "ci-bot" || info.Token == "" || info.Token == def.Token || info.TokenFile == "" {
		t.Fatalf("CreateToken: %+v, %v", info, err)
	}
	if raw, err := os.ReadFile(info.TokenFile); err != nil || !strings.Contains(string(raw), info.Token) {
		t.Errorf("token file %s: %q, %v", info.TokenFile, raw, err)
	}
	if code := get(info.Token); code != http.StatusOK {
		t.Errorf("metrics with ci-bot's token: %d", code)
	}
	names := map[string]bool{}
	for _, i := range e.Tokens() {
		names[i.Name] = true
	}
	if !names["ci-bot"] || !names[agenttoken.Default] {
		t.Errorf("Tokens: %v", names)
	}
	if _, err := e.CreateToken("ci-bot"); err == nil {
		t.Error("a second token named ci-bot was made")
	}
	if _, err := e.CreateToken("Not A Name"); err == nil {
		t.Error("a token with a bad name was made")
	}
	if !auditHas(t, e, `"type":"cli.token"`, `"name":"ci-bot"`, `"change":"created"`) {
		t.Error("the creation is not in the audit log")
	}
	if err := e.RevokeToken("ci-bot"); err != nil {
		t.Fatal(err)
	}
	if code := get(info.Token); code != http.StatusUnauthorized {
		t.Errorf("metrics with the revoked token: %d, want 401", code)
	}
	if !auditHas(t, e, `"type":"cli.token"`, `"name":"ci-bot"`, `"change":"revoked"`) {
		t.Error("the revocation is not in the audit log")
	}
	if err := e.RevokeToken("ci-bot"); err == nil {
		t.Error("revoking a revoked token: no error")
	}
	if code := get("not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("metrics with a wrong token: %d", code)
	}
}

// TestUnauthorizedReasons: the MCP listener's 401 says why, in the body and in the RFC 6750
// challenge: no token, another scheme, a wrong token, a revoked agent token (by name).
func TestUnauthorizedReasons(t *testing.T) {
	e := testEngine(t, stamp(), nil)
	h := e.httpHandler()
	bot, err := e.CreateToken("ci-bot")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.RevokeToken("ci-bot"); err != nil {
		t.Fatal(err)
	}
	for auth, want := range map[string]string{
		"":                                   "no bearer token",
		"Basic dXNlcjpwYXNz":                 "not a bearer token",
		"Bearer " + strings.Repeat("ab", 32): "not a token of this server",
		"Bearer " + bot.Token:                "agent token ci-bot was revoked",
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/mcp/stamp", strings.NewReader(`{}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		h.ServeHTTP(rec, req)
		ch := rec.Header().Get("WWW-Authenticate")
		if rec.Code != http.StatusUnauthorized || !strings.Contains(ch, `error="invalid_token"`) || !strings.Contains(ch, want) || !strings.Contains(rec.Body.String(), want) || !strings.Contains(rec.Body.String(), "clihostctl token") {
			t.Errorf("%q: %d, WWW-Authenticate %q, body %q; want 401 saying %q", auth, rec.Code, ch, rec.Body.String(), want)
		}
	}
}
