package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/internal/fixture"
)

// lockedBuffer is a log sink safe for the daemon's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// miniOAuth is an authorization server for one PKCE authorization and one device authorization.
func miniOAuth(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	challenges := map[string]string{}
	mux := http.NewServeMux()
	token := func(w http.ResponseWriter, access string) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": access, "refresh_token": "rt-" + access, "token_type": "Bearer", "expires_in": 3600})
	}
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		challenges["code-1"] = q.Get("code_challenge")
		mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code=code-1&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			mu.Lock()
			want := challenges[r.PostForm.Get("code")]
			mu.Unlock()
			if want == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != want {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
				return
			}
			token(w, "TOKEN-AUTHCODE-7f3a")
		case "urn:ietf:params:oauth:grant-type:device_code":
			token(w, "TOKEN-DEVICE-91bc")
		}
	})
	mux.HandleFunc("POST /device", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"device_code":"dc","user_code":"ABCD-EFGH","verification_uri":"https://auth.example/activate","interval":1,"expires_in":60}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestSetupOAuthOverDaemon: clihostctl setup's path through the daemon. An authorization-code step
// sends the authorization URL as a visit (the test's browser follows it to the daemon's loopback
// callback), a device-code step sends the verification URL and user code; both tokens land in
// their secret slots, and no token is in the events, the daemon's log or the audit log.
func TestSetupOAuthOverDaemon(t *testing.T) {
	srv := miniOAuth(t)
	cli := strings.Replace(fixture.CLI("touch", "stamp", "  make: ./tools/make/TOOL.md\n"), "commands:\n", `setup:
  - id: web
    kind: oauth
    secret_slug: svc/web
    oauth: { client_id: cli, authorization_url: "`+srv.URL+`/authorize", token_url: "`+srv.URL+`/token" }
  - id: tv
    kind: oauth
    secret_slug: svc/tv
    oauth: { flow: device_code, client_id: cli, device_authorization_url: "`+srv.URL+`/device", token_url: "`+srv.URL+`/token" }
commands:
`, 1)
	files := stamp()
	files["stamp/CLI.md"] = cli
	e := testEngine(t, files, nil)
	var logs lockedBuffer
	e.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var events []control.SetupEvent
	last := e.Setup(context.Background(), control.SetupRequest{ScopeRequest: control.ScopeRequest{Bundle: "stamp", Workspace: e.workspace}},
		control.Caller{User: e.user}, func(ev control.SetupEvent) {
			events = append(events, ev)
			if ev.UserCode == "" {
				resp, err := http.Get(ev.URL) // the browser: authorize, then the redirect to the callback
				if err != nil {
					t.Error(err)
					return
				}
				_ = resp.Body.Close()
			}
		})
	if last.Phase != "done" {
		t.Fatalf("setup: %+v %+v", last, last.Error)
	}
	if len(events) != 2 || !strings.HasPrefix(events[0].URL, srv.URL+"/authorize?") || events[1].UserCode != "ABCD-EFGH" || events[1].URL != "https://auth.example/activate" {
		t.Fatalf("events %+v", events)
	}
	_, s, _, _, herr := e.scopeFor(control.ScopeRequest{Bundle: "stamp", Workspace: e.workspace}, hostCaller(control.Caller{User: e.user}))
	if herr != nil {
		t.Fatal(herr)
	}
	for slug, want := range map[string]string{"svc/web": "TOKEN-AUTHCODE-7f3a", "svc/tv": "TOKEN-DEVICE-91bc"} {
		if v, ok, err := e.setup.Secret(s, slug); v != want || !ok || err != nil {
			t.Errorf("%s: %q %v %v", slug, v, ok, err)
		}
	}
	raw, _ := json.Marshal(events)
	audit, _ := os.ReadFile(e.AuditFile())
	for _, tok := range []string{"TOKEN-AUTHCODE", "TOKEN-DEVICE", "code-1"} {
		for where, text := range map[string]string{"events": string(raw) + string(mustJSON(last)), "log": logs.String(), "audit": string(audit)} {
			if strings.Contains(text, tok) {
				t.Errorf("%s shows %s", where, tok)
			}
		}
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// TestSetupOAuthCallbackOnlyCaller: an oauth step's callback server answers only connections of
// the user who runs setup. Another local user who learnt the authorization URL (xdg-open's or the
// browser's argv, world-readable in /proc/PID/cmdline) and brings a code of its own with this
// login's state and PKCE challenge would otherwise set the victim's bundle up with the attacker's
// account (login CSRF); it gets 403, and the person's own browser then completes the login.
func TestSetupOAuthCallbackOnlyCaller(t *testing.T) {
	srv := miniOAuth(t)
	cli := strings.Replace(fixture.CLI("touch", "stamp", "  make: ./tools/make/TOOL.md\n"), "commands:\n", `setup:
  - id: web
    kind: oauth
    secret_slug: svc/web
    oauth: { client_id: cli, authorization_url: "`+srv.URL+`/authorize", token_url: "`+srv.URL+`/token" }
commands:
`, 1)
	files := stamp()
	files["stamp/CLI.md"] = cli
	e := testEngine(t, files, nil)
	victim := control.Caller{User: "nobody", Peer: &control.Peer{UID: fixture.AgentID, GID: fixture.AgentID}}
	last := e.Setup(context.Background(), control.SetupRequest{ScopeRequest: control.ScopeRequest{Bundle: "stamp", Workspace: e.workspace}},
		victim, func(ev control.SetupEvent) {
			// The attacker: this test process, root, not the user running setup.
			resp, err := http.Get(ev.URL)
			if err != nil {
				t.Error(err)
				return
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("another user's redirect to the callback: HTTP %d, want 403", resp.StatusCode)
			}
			// The person's browser, running as the user who runs setup.
			out, err := exec.Command("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
				"curl", "-sS", "-L", "-o", "/dev/null", "-w", "%{http_code}", ev.URL).CombinedOutput()
			if err != nil || string(out) != "200" {
				t.Errorf("the user's own browser: %s %v", out, err)
			}
		})
	if last.Phase != "done" {
		t.Fatalf("setup: %+v %+v", last, last.Error)
	}
}
