package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/setup"
)

// TestCallRefreshesExpiredOAuthToken: a tool given ${secrets.SLUG} of an oauth step whose access
// token expired gets a fresh one: the host refreshes it at the step's token endpoint (a local OAuth
// server) with the stored refresh token before the call, and stores it. The tool (sha256sum of its
// stdin) proves which token reached it without printing it.
func TestCallRefreshesExpiredOAuthToken(t *testing.T) {
	fixture.Need(t, "sha256sum")
	srv, refreshes := refreshServer(t)
	files := sumBundle(srv.URL)
	hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	checkRefreshed(t, files, "sum", "hash", refreshes, func(out any) bool {
		s, _ := out.(string)
		return strings.HasPrefix(s, hash("fresh-token-2"))
	})
}

// TestInventorySlotRefreshesExpiredOAuthToken: the same through auth.ref: a SECRETS.md slot that an
// oauth step fills reaches the CLI's environment refreshed when its access token expired. jq shows
// which token arrived by its suffix alone (the whole value would come back redacted).
func TestInventorySlotRefreshesExpiredOAuthToken(t *testing.T) {
	fixture.Need(t, "jq")
	srv, refreshes := refreshServer(t)
	files := vaultBundle(srv.URL, `---
secrets:
  - slug: svctoken
    name: Service token
    description: The access token the oauth step obtains.
    metadata: { bindings: { env: SVC_TOKEN } }
---
`)
	checkRefreshed(t, files, "vault", "show", refreshes, func(out any) bool { return out == "2" })
}

// vaultBundle is bundle "vault": jq printing which token reached SVC_TOKEN, its auth.ref the
// SECRETS.md text secrets, the token filled by an oauth step at url.
func vaultBundle(url, secrets string) map[string]string {
	return map[string]string{
		"vault/CLI.md": `---
name: vault
id: vault
description: jq stands in for a CLI reading its token from its environment.
version: 1.0.0
bin: jq
install: [{ method: apt, package: jq }]
version_check: { cmd: "jq --version", parse: 'jq-(\d+\.\d+(?:\.\d+)?)', range: ">=1.5" }
auth: { ref: ./SECRETS.md }
sandbox:
  network: { egress: [] }
  fs: { read: [], write: [] }
  exec: { allow: false }
  env: { pass: [] }
` + oauthSetup(url) + `output: { default_format: json }
commands:
  show: ./tools/show/TOOL.md
---
`,
		"vault/SECRETS.md": secrets,
		"vault/tools/show/TOOL.md": `---
name: Show
id: vault.show
description: Shows which token arrived.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["-n", "$ENV.SVC_TOKEN | ltrimstr(\"fresh-token-\") | ltrimstr(\"stale-token-\")"] }
---
`,
	}
}

// sumBundle is bundle "sum": sha256sum of a ${secrets.svctoken} an oauth step at url fills, given
// on stdin (the hash proves which token arrived without printing it).
func sumBundle(url string) map[string]string {
	return map[string]string{
		"sum/CLI.md": `---
name: sum
id: sum
description: Hashes its stdin.
version: 1.0.0
bin: sha256sum
install: [{ method: apt, package: coreutils }]
version_check: { cmd: "sha256sum --version", parse: 'sha256sum \(GNU coreutils\) (\d+\.\d+)', range: "" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: false }
  env: { pass: [] }
` + oauthSetup(url) + `commands:
  hash: ./tools/hash/TOOL.md
---
`,
		"sum/tools/hash/TOOL.md": `---
name: Hash
id: sum.hash
description: Hashes the token.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [], stdin: "${secrets.svctoken}" }
---
`,
	}
}

// oauthSetup is a CLI.md setup block with one oauth step filling the svctoken slot.
func oauthSetup(url string) string {
	return `setup:
  - id: login
    kind: oauth
    secret_slug: svctoken
    oauth: { client_id: cli, authorization_url: "` + url + `/authorize", token_url: "` + url + `/token" }
`
}

// refreshServer is a local OAuth server that refreshes refresh-1 into fresh-token-2, counting.
func refreshServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	refreshes := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ParseForm() != nil || r.PostForm.Get("grant_type") != "refresh_token" || r.PostForm.Get("refresh_token") != "refresh-1" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		refreshes.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"fresh-token-2","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(srv.Close)
	return srv, refreshes
}

// checkRefreshed sets up bundle id's oauth step with an expired token and a refresh token, calls
// tool twice and wants fresh(value) both times, one refresh in all, and the fresh token stored.
func checkRefreshed(t *testing.T, files map[string]string, id, tool string, refreshes *atomic.Int32, fresh func(any) bool) {
	t.Helper()
	engine := setupEngine(t)
	h, _ := writeBundle(t, files, Options{Setup: engine})
	b := bundle(t, h, id)
	ws := fixture.Workspace(t)
	scope := lifecycle.Scope{Bundle: b.Key(), Workspace: ws, User: "alice"}
	bin, _ := h.resolve(b)
	lenv := lifecycle.Env{BinPath: bin, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"}}
	if _, err := engine.Run(context.Background(), b, scope, lenv, nil, setup.RunOptions{Values: map[string]string{"login": "stale-token-1"}}); err != nil {
		t.Fatal(err)
	}
	// The grant names the endpoint and client it was issued through: the step's.
	flow := b.CLI.Setup[0].OAuth
	grant, _ := json.Marshal(map[string]any{"refresh_token": "refresh-1", "expiry": time.Now().Add(-time.Minute),
		"token_url": flow.TokenURL, "client_id": flow.ClientID})
	if err := engine.Secrets.Put(scope.Key(), "oauth/svctoken", string(grant)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		env := h.Call(context.Background(), b, tool, map[string]any{}, Caller{Workspace: ws, User: "alice"}, CallOptions{})
		if !env.OK || !fresh(env.Value) {
			t.Fatalf("call %d: %+v %+v; want the hash of the refreshed token", i, env, env.Error)
		}
	}
	if n := refreshes.Load(); n != 1 {
		t.Fatalf("%d refreshes, want 1 (the second call uses the stored fresh token)", n)
	}
	if v, _, _ := engine.Secret(scope, "svctoken"); v != "fresh-token-2" {
		t.Fatalf("stored token %q", v)
	}
}

// TestOAuthKindSlotFilledByOAuthStep: an inventory written from AIP-19 declares the token an
// oauth step obtains as kind: oauth and exposes its accessToken field; the step stores the bare
// access token (its refresh token sealed beside it), and the call gets that token, refreshed, in
// the variable: not setup_required because the value "is not a JSON object".
func TestOAuthKindSlotFilledByOAuthStep(t *testing.T) {
	fixture.Need(t, "jq")
	srv, refreshes := refreshServer(t)
	files := vaultBundle(srv.URL, `---
secrets:
  - slug: svctoken
    name: Service token
    description: The OAuth token the oauth step obtains.
    kind: oauth
    exposures:
      - { kind: env, name: SVC_TOKEN, field: accessToken }
---
`)
	// Before setup ran, the refusal names the setup that fills the slot, not only secret set.
	h, _ := writeBundle(t, files, Options{Setup: setupEngine(t)})
	env := h.Call(context.Background(), bundle(t, h, "vault"), "show", map[string]any{}, Caller{Workspace: fixture.Workspace(t), User: "alice"}, CallOptions{})
	if env.OK || env.Error.Code != "setup_required" || !strings.Contains(env.Error.Hint, "clihostctl setup vault") {
		t.Fatalf("unset slot: %+v %+v; want setup_required naming clihostctl setup", env, env.Error)
	}
	checkRefreshed(t, files, "vault", "show", refreshes, func(out any) bool { return out == "2" })
}

// TestCallRefreshFailureSaysSo: when a ${secrets.SLUG}'s expired oauth token cannot be refreshed
// (the server refuses the refresh token), the call fails saying so, with setup_failed and the hint
// to run setup again, not that the secret "has no value" (its value is there, expired).
func TestCallRefreshFailureSaysSo(t *testing.T) {
	fixture.Need(t, "sha256sum")
	srv, _ := refreshServer(t)
	files := sumBundle(srv.URL)
	engine := setupEngine(t)
	h, _ := writeBundle(t, files, Options{Setup: engine})
	b := bundle(t, h, "sum")
	ws := fixture.Workspace(t)
	scope := lifecycle.Scope{Bundle: b.Key(), Workspace: ws, User: "alice"}
	bin, _ := h.resolve(b)
	lenv := lifecycle.Env{BinPath: bin, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"}}
	if _, err := engine.Run(context.Background(), b, scope, lenv, nil, setup.RunOptions{Values: map[string]string{"login": "stale-token-1"}}); err != nil {
		t.Fatal(err)
	}
	flow := b.CLI.Setup[0].OAuth
	grant, _ := json.Marshal(map[string]any{"refresh_token": "revoked-9", "expiry": time.Now().Add(-time.Minute),
		"token_url": flow.TokenURL, "client_id": flow.ClientID})
	if err := engine.Secrets.Put(scope.Key(), "oauth/svctoken", string(grant)); err != nil {
		t.Fatal(err)
	}
	env := h.Call(context.Background(), b, "hash", map[string]any{}, Caller{Workspace: ws, User: "alice"}, CallOptions{})
	if env.OK || env.Error == nil {
		t.Fatalf("call with a refused refresh: %+v", env)
	}
	if env.Error.Code != errcode.SetupFailed || !strings.Contains(env.Error.Message, "refresh") || !strings.Contains(env.Error.Hint, "setup") {
		t.Errorf("error %s: %q (hint %q), want setup_failed saying the refresh failed", env.Error.Code, env.Error.Message, env.Error.Hint)
	}
	if strings.Contains(env.Error.Message+env.Error.Hint, "revoked-9") || strings.Contains(env.Error.Message+env.Error.Hint, "stale-token-1") {
		t.Errorf("the error shows a token: %+v", env.Error)
	}
}
