package setup

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/manifest"
)

// authServer is a small OAuth 2.0 authorization server on loopback: the authorization endpoint
// (PKCE S256 required, loopback redirect URIs only), the token endpoint (authorization_code,
// refresh_token, device_code grants), and the device authorization endpoint (RFC 8628).
type authServer struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	codes     map[string]authGrant // issued codes, deleted at first use
	refreshes map[string]bool      // live refresh tokens
	issued    []string             // every access and refresh token and code handed out
	n         int
	// device flow: the answers the token endpoint gives to successive polls ("" = a token).
	devicePolls []string
	pollTimes   []time.Time
	userCode    string
	// token, when set, answers the token endpoint instead (a hostile server).
	token func(w http.ResponseWriter, r *http.Request)
	// expiresIn is the lifetime of the tokens it issues, in seconds (0: 3600).
	expiresIn int
	// lastAuthorize is the last authorization request's query.
	lastAuthorize url.Values
}

type authGrant struct{ challenge, redirect string }

func newAuthServer(t *testing.T) *authServer {
	a := &authServer{t: t, codes: map[string]authGrant{}, refreshes: map[string]bool{}, userCode: "WDJB-MJHT"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.tokenEndpoint)
	mux.HandleFunc("POST /device", a.device)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *authServer) secret(kind string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	v := fmt.Sprintf("%s_%d_s3cr3t%x", kind, a.n, time.Now().UnixNano())
	a.issued = append(a.issued, v)
	return v
}

func (a *authServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	a.lastAuthorize = q
	a.mu.Unlock()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme != "http" || !manifest.IsLoopbackHost(redirect.Hostname()) {
		http.Error(w, "redirect_uri must be loopback", http.StatusBadRequest)
		return
	}
	if q.Get("response_type") != "code" || q.Get("client_id") != "cli" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	code := a.issueCode(q.Get("code_challenge"), redirect.String())
	back := redirect.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// issueCode hands out a code bound to a PKCE challenge and a redirect URI.
func (a *authServer) issueCode(challenge, redirect string) string {
	code := a.secret("code")
	a.mu.Lock()
	a.codes[code] = authGrant{challenge: challenge, redirect: redirect}
	a.mu.Unlock()
	return code
}

func (a *authServer) tokenEndpoint(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	hostile := a.token
	a.mu.Unlock()
	if hostile != nil {
		hostile(w, r)
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("client_id") != "cli" {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	f := r.PostForm
	switch f.Get("grant_type") {
	case "authorization_code":
		a.mu.Lock()
		g, ok := a.codes[f.Get("code")]
		delete(a.codes, f.Get("code"))
		a.mu.Unlock()
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if !ok || g.redirect != f.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
	case "refresh_token":
		a.mu.Lock()
		ok := a.refreshes[f.Get("refresh_token")]
		delete(a.refreshes, f.Get("refresh_token"))
		a.mu.Unlock()
		if !ok {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
	case "urn:ietf:params:oauth:grant-type:device_code":
		a.mu.Lock()
		a.pollTimes = append(a.pollTimes, time.Now())
		answer := "expired_token"
		if len(a.devicePolls) > 0 {
			answer, a.devicePolls = a.devicePolls[0], a.devicePolls[1:]
		}
		a.mu.Unlock()
		if f.Get("device_code") != "dev-code-1" {
			answer = "invalid_grant"
		}
		if answer != "" {
			oauthError(w, http.StatusBadRequest, answer)
			return
		}
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	a.issueToken(w)
}

func (a *authServer) issueToken(w http.ResponseWriter) {
	access, refresh := a.secret("access"), a.secret("refresh")
	a.mu.Lock()
	a.refreshes[refresh] = true
	life := cmp.Or(a.expiresIn, 3600)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": access, "token_type": "Bearer", "refresh_token": refresh, "expires_in": life})
}

func (a *authServer) device(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("client_id") != "cli" {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"device_code": "dev-code-1", "user_code": a.userCode,
		"verification_uri": a.srv.URL + "/activate", "interval": 1, "expires_in": 600})
}

func oauthError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

// setToken makes the token endpoint answer with h.
func (a *authServer) setToken(h func(w http.ResponseWriter, r *http.Request)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token = h
}

// step is an oauth step against this server.
func (a *authServer) step(flow string) manifest.SetupStep {
	return manifest.SetupStep{ID: "login", Kind: manifest.StepOAuth, SecretSlug: "svc/token", OAuth: &manifest.OAuthFlow{
		Flow: flow, ClientID: "cli", AuthorizationURL: a.srv.URL + "/authorize", TokenURL: a.srv.URL + "/token",
		DeviceAuthorizationURL: a.srv.URL + "/device", Scopes: []string{"read", "write"}}}
}

// browser follows the authorization URL and its redirect to the callback, as a person's browser.
func browser(t *testing.T) *answerer {
	return &answerer{visit: func(_ context.Context, _ manifest.SetupStep, u string) error {
		resp, err := http.Get(u)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("browser ended on HTTP %d", resp.StatusCode)
		}
		return nil
	}}
}

// noLeak fails when any credential the server issued shows in texts.
func (a *authServer) noLeak(t *testing.T, texts ...string) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.issued {
		for _, x := range texts {
			if strings.Contains(x, s) {
				t.Errorf("a credential leaked into %q", x)
			}
		}
	}
}

// errText is everything an error says.
func errText(err error) string {
	if se, ok := err.(*StepError); ok {
		return se.Error() + " " + se.Hint + fmt.Sprint(se.Err)
	}
	return fmt.Sprint(err)
}

func TestOAuthAuthorizationCodePKCE(t *testing.T) {
	a := newAuthServer(t)
	f := newFixture(t, a.step(""))
	status, err := f.run(browser(t), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok, ok, err := f.e.Secret(f.s, "svc/token")
	if !ok || err != nil || !strings.HasPrefix(tok, "access_") {
		t.Fatalf("Secret = %q %v %v, want the access token", tok, ok, err)
	}
	a.mu.Lock()
	q := a.lastAuthorize
	a.mu.Unlock()
	if q.Get("code_challenge_method") != "S256" || q.Get("scope") != "read write" || !strings.HasPrefix(q.Get("redirect_uri"), "http://127.0.0.1:") {
		t.Errorf("authorization request %v", q)
	}
	raw, ok, _ := f.e.getSecret(f.s, prefixOAuth+"svc/token")
	var g oauthGrant
	if !ok || json.Unmarshal([]byte(raw), &g) != nil || !strings.HasPrefix(g.RefreshToken, "refresh_") || g.Expiry.IsZero() {
		t.Fatalf("grant = %q", raw)
	}
	js, _ := json.Marshal(status)
	a.noLeak(t, string(js))
	// Reset forgets the token and the grant.
	if err := f.e.Reset(f.b, f.s); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := f.e.getSecret(f.s, prefixOAuth+"svc/token"); ok {
		t.Fatal("Reset kept the grant")
	}
}

// The callback only takes the redirect carrying this login's state; a forged one (wrong or no
// state) is refused without using the callback up, and the accepted one cannot be replayed.
func TestOAuthCallbackStateAndReplay(t *testing.T) {
	a := newAuthServer(t)
	f := newFixture(t, a.step(manifest.FlowAuthorizationCode))
	var accepted string
	ans := &answerer{visit: func(_ context.Context, _ manifest.SetupStep, u string) error {
		au, _ := url.Parse(u)
		cb := au.Query().Get("redirect_uri")
		forged := a.issueCode("attacker-challenge", cb)
		for _, q := range []string{"?code=" + forged, "?code=" + forged + "&state=wrong", "?error=access_denied&state=x"} {
			if code := get(t, cb+q); code != http.StatusBadRequest {
				t.Errorf("forged callback %s: HTTP %d, want 400", q, code)
			}
		}
		c := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			accepted = req.URL.String()
			return nil
		}}
		resp, err := c.Get(u)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		return nil
	}}
	if _, err := f.run(ans, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := f.e.Secret(f.s, "svc/token"); !strings.HasPrefix(v, "access_") {
		t.Fatalf("token %q", v)
	}
	if accepted == "" {
		t.Fatal("the browser was never redirected")
	}
	// The server is closed once the step is done: a replay reaches nobody.
	if resp, err := http.Get(accepted); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("replayed callback answered HTTP %d", resp.StatusCode)
	}
}

// A second request to a live callback (the redirect replayed while the exchange runs) gets 410.
func TestOAuthCallbackReplayWhileLive(t *testing.T) {
	cb, err := listenCallback("", "code", oauthCallbackPath, "st", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.close()
	if code := get(t, cb.url+"?code=c1&state=st"); code != http.StatusOK {
		t.Fatalf("first: %d", code)
	}
	if code := get(t, cb.url+"?code=c2&state=st"); code != http.StatusGone {
		t.Fatalf("replay: %d, want 410", code)
	}
	if res := <-cb.result; res.value != "c1" {
		t.Fatalf("accepted %q", res.value)
	}
}

// A code injected with the right state but issued for another PKCE challenge (a stolen code) is
// refused by the token endpoint: the verifier does not match; nothing is stored.
func TestOAuthCodeVerifierMismatch(t *testing.T) {
	a := newAuthServer(t)
	f := newFixture(t, a.step(""))
	ans := &answerer{visit: func(_ context.Context, _ manifest.SetupStep, u string) error {
		au, _ := url.Parse(u)
		q := au.Query()
		stolen := a.issueCode("not-the-hosts-challenge", q.Get("redirect_uri"))
		get(t, q.Get("redirect_uri")+"?code="+url.QueryEscape(stolen)+"&state="+url.QueryEscape(q.Get("state")))
		return nil
	}}
	_, err := f.run(ans, RunOptions{})
	se := stepErr(t, err, errcode.SetupFailed, "login")
	if !strings.Contains(se.Message, "invalid_grant") {
		t.Errorf("message %q", se.Message)
	}
	if _, ok, _ := f.e.Secret(f.s, "svc/token"); ok {
		t.Fatal("a token was stored")
	}
	a.noLeak(t, errText(err))
}

// Hostile token endpoints: errors echoing credentials, huge bodies, HTML, redirects. Each fails
// the step with nothing stored and nothing the server sent in the error but status and code.
func TestOAuthHostileTokenEndpoint(t *testing.T) {
	const echoed = "ECHOED-SECRET-xyz"
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the client followed the token endpoint's redirect")
	}))
	defer elsewhere.Close()
	for name, h := range map[string]http.HandlerFunc{
		"error": func(w http.ResponseWriter, r *http.Request) {
			_ = r.ParseForm()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_request", "error_description": echoed + r.PostForm.Get("code_verifier") + r.PostForm.Get("code")})
		},
		"huge": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"access_token":"` + echoed))
			_, _ = w.Write([]byte(strings.Repeat("A", 4<<20)))
		},
		"html": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><body>" + echoed + "</body></html>"))
		},
		"html-500": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("<html><body>" + echoed + "</body></html>"))
		},
		"no-token": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"token_type":"Bearer","note":"` + echoed + `"}`))
		},
		"redirect": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusTemporaryRedirect)
		},
	} {
		t.Run(name, func(t *testing.T) {
			a := newAuthServer(t)
			a.setToken(h)
			f := newFixture(t, a.step(""))
			_, err := f.run(browser(t), RunOptions{})
			stepErr(t, err, errcode.SetupFailed, "login")
			if strings.Contains(errText(err), echoed) || strings.Contains(errText(err), "<html") {
				t.Errorf("error quotes the server: %s", errText(err))
			}
			a.noLeak(t, errText(err))
			if _, ok, _ := f.e.Secret(f.s, "svc/token"); ok {
				t.Fatal("a token was stored")
			}
		})
	}
}

// Endpoints that are plain http to a non-loopback host, or not http(s) at all, are refused before
// any request; so is an authorization_url presetting what the host sets, and a non-loopback
// callback host.
func TestOAuthRefusesUnsafeEndpoints(t *testing.T) {
	a := newAuthServer(t)
	for name, mod := range map[string]func(*manifest.OAuthFlow){
		"http token_url": func(o *manifest.OAuthFlow) { o.TokenURL = "http://auth.example.com/token" },
		"http authorize": func(o *manifest.OAuthFlow) { o.AuthorizationURL = "http://192.0.2.10/authorize" },
		"http device": func(o *manifest.OAuthFlow) {
			o.Flow, o.DeviceAuthorizationURL = manifest.FlowDeviceCode, "http://auth.example.com/device"
		},
		"file token_url":      func(o *manifest.OAuthFlow) { o.TokenURL = "file:///etc/passwd" },
		"userinfo":            func(o *manifest.OAuthFlow) { o.TokenURL = "https://u:p@auth.example.com/token" },
		"preset redirect_uri": func(o *manifest.OAuthFlow) { o.AuthorizationURL += "?redirect_uri=https://evil.example/cb" },
		"preset state":        func(o *manifest.OAuthFlow) { o.AuthorizationURL += "?state=fixed" },
		"unknown flow":        func(o *manifest.OAuthFlow) { o.Flow = "implicit" },
		"no client":           func(o *manifest.OAuthFlow) { o.ClientID = "" },
		// The authorization URL is shown to the person as it is: a bidi override, a C1 control (a
		// terminal's CSI) or a homograph host would make it read as another.
		"bidi authorize":      func(o *manifest.OAuthFlow) { o.AuthorizationURL += "/\u202emoc.elgoog.stnuocca" },
		"c1 authorize":        func(o *manifest.OAuthFlow) { o.AuthorizationURL += "/\u009b2J" },
		"homograph authorize": func(o *manifest.OAuthFlow) { o.AuthorizationURL = "https://\u0430ccounts.example.com/authorize" },
		"bidi in query":       func(o *manifest.OAuthFlow) { o.AuthorizationURL += "?prompt=\u202e" },
	} {
		t.Run(name, func(t *testing.T) {
			st := a.step("")
			mod(st.OAuth)
			st.OAuth.TimeoutMS = 500 // a flow started by mistake ends soon
			f := newFixture(t, st)
			ans := &answerer{visit: func(context.Context, manifest.SetupStep, string) error {
				t.Error("the flow started")
				return nil
			}}
			_, err := f.run(ans, RunOptions{})
			stepErr(t, err, errcode.SetupFailed, "login")
		})
	}
	t.Run("no flow", func(t *testing.T) {
		f := newFixture(t, manifest.SetupStep{ID: "login", Kind: manifest.StepOAuth, SecretSlug: "svc/token"})
		_, err := f.run(browser(t), RunOptions{})
		stepErr(t, err, errcode.SetupFailed, "login")
	})
	t.Run("non-loopback callback host", func(t *testing.T) {
		f := newFixture(t, a.step(""))
		f.e.CallbackHost = "0.0.0.0"
		_, err := f.run(browser(t), RunOptions{})
		stepErr(t, err, errcode.SetupFailed, "login")
	})
	for _, ok := range []string{"https://auth.example.com/token", "http://127.0.0.1:9/token", "http://[::1]:9/t", "http://localhost:9/t"} {
		if err := manifest.CheckOAuthEndpoint("x", ok); err != nil {
			t.Errorf("manifest.CheckOAuthEndpoint(%q) = %v", ok, err)
		}
	}
}

// deviceAnswerer shows device codes (and fails on Visit).
type deviceAnswerer struct {
	answerer
	mu        sync.Mutex
	uri, code string
}

func (d *deviceAnswerer) ShowDeviceCode(_ context.Context, _ manifest.SetupStep, uri, code string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.uri, d.code = uri, code
	return nil
}

func TestOAuthDeviceCode(t *testing.T) {
	a := newAuthServer(t)
	a.devicePolls = []string{"authorization_pending", ""}
	f := newFixture(t, a.step(manifest.FlowDeviceCode))
	d := &deviceAnswerer{}
	if _, err := f.run(d, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if d.code != "WDJB-MJHT" || d.uri != a.srv.URL+"/activate" {
		t.Errorf("shown %q %q", d.uri, d.code)
	}
	if v, _, _ := f.e.Secret(f.s, "svc/token"); !strings.HasPrefix(v, "access_") {
		t.Fatalf("token %q", v)
	}
	// A surface that cannot show a code fails the step rather than hanging.
	g := newFixture(t, a.step(manifest.FlowDeviceCode))
	_, err := g.run(browser(t), RunOptions{})
	stepErr(t, err, errcode.SetupFailed, "login")
}

// slow_down adds 5 s to the polling interval (RFC 8628 §3.5).
func TestOAuthDeviceCodeSlowDown(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 7 s")
	}
	a := newAuthServer(t)
	a.devicePolls = []string{"slow_down", ""}
	f := newFixture(t, a.step(manifest.FlowDeviceCode))
	if _, err := f.run(&deviceAnswerer{}, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	polls := a.pollTimes
	a.mu.Unlock()
	if len(polls) != 2 {
		t.Fatalf("%d polls", len(polls))
	}
	if gap := polls[1].Sub(polls[0]); gap < 6*time.Second {
		t.Fatalf("poll after slow_down came %s later, want interval 1 s + 5 s", gap)
	}
}

func TestOAuthDeviceCodeExpiredAndDenied(t *testing.T) {
	for answer, want := range map[string]string{"expired_token": "expired", "access_denied": "access_denied"} {
		a := newAuthServer(t)
		a.devicePolls = []string{"authorization_pending", answer}
		f := newFixture(t, a.step(manifest.FlowDeviceCode))
		_, err := f.run(&deviceAnswerer{}, RunOptions{})
		se := stepErr(t, err, errcode.SetupFailed, "login")
		if !strings.Contains(se.Message, want) {
			t.Errorf("%s: message %q", answer, se.Message)
		}
		if _, ok, _ := f.e.Secret(f.s, "svc/token"); ok {
			t.Fatalf("%s: a token was stored", answer)
		}
	}
	// The step's own timeout ends a flow the person never completes.
	a := newAuthServer(t)
	a.devicePolls = []string{"authorization_pending", "authorization_pending", "authorization_pending", "authorization_pending"}
	st := a.step(manifest.FlowDeviceCode)
	st.OAuth.TimeoutMS = 1500
	f := newFixture(t, st)
	_, err := f.run(&deviceAnswerer{}, RunOptions{})
	if se := stepErr(t, err, errcode.SetupFailed, "login"); !strings.Contains(se.Message, "expired") {
		t.Errorf("message %q", se.Message)
	}
}

// A device authorization answer whose user code would write control characters to the terminal,
// or whose verification URI is plain http elsewhere, is refused.
func TestOAuthDeviceCodeHostileAnswer(t *testing.T) {
	for _, code := range []string{"\x1b]0;pwned\x07ABCD", strings.Repeat("A", 200)} {
		a := newAuthServer(t)
		a.userCode = code
		f := newFixture(t, a.step(manifest.FlowDeviceCode))
		d := &deviceAnswerer{}
		_, err := f.run(d, RunOptions{})
		stepErr(t, err, errcode.SetupFailed, "login")
		if d.code != "" {
			t.Errorf("shown user code %q", d.code)
		}
	}
	da := map[string]string{"verification_uri": "http://phish.example/activate"}
	if err := manifest.CheckOAuthEndpoint("verification_uri", da["verification_uri"]); err == nil {
		t.Error("plain http verification URI accepted")
	}
}

// FreshSecret refreshes an expired token with the refresh token kept beside it, and leaves a live
// one alone.
func TestOAuthRefresh(t *testing.T) {
	a := newAuthServer(t)
	f := newFixture(t, a.step(""))
	if _, err := f.run(browser(t), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	first, _, _ := f.e.Secret(f.s, "svc/token")
	if v, ok, err := f.e.FreshSecret(f.ctx, f.b, f.s, "svc/token"); v != first || !ok || err != nil {
		t.Fatalf("live token: %q %v %v", v, ok, err)
	}
	f.e.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	v, ok, err := f.e.FreshSecret(f.ctx, f.b, f.s, "svc/token")
	if err != nil || !ok || v == first || !strings.HasPrefix(v, "access_") {
		t.Fatalf("expired token: %q %v %v", v, ok, err)
	}
	if stored, _, _ := f.e.Secret(f.s, "svc/token"); stored != v {
		t.Fatal("the refreshed token was not stored")
	}
	// The old refresh token was used up (rotated): a second refresh uses the new one.
	if v2, _, err := f.e.FreshSecret(f.ctx, f.b, f.s, "svc/token"); err != nil || v2 == v {
		t.Fatalf("second refresh: %q %v", v2, err)
	}
	// Calls racing on an expired token refresh it once: the rotated refresh token is used once.
	a.mu.Lock()
	a.expiresIn = 4 * 3600
	a.mu.Unlock()
	f.e.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	var wg sync.WaitGroup
	got := make([]string, 4)
	for i := range got {
		wg.Go(func() {
			v, _, err := f.e.FreshSecret(f.ctx, f.b, f.s, "svc/token")
			if err != nil {
				t.Errorf("concurrent refresh: %v", err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	for _, v := range got[1:] {
		if v != got[0] {
			t.Fatalf("concurrent refreshes handed out %q", got)
		}
	}
	// A refused refresh fails without quoting the server.
	a.setToken(func(w http.ResponseWriter, _ *http.Request) { oauthError(w, http.StatusBadRequest, "invalid_grant") })
	f.e.Now = func() time.Time { return time.Now().Add(5 * time.Hour) }
	_, _, err = f.e.FreshSecret(f.ctx, f.b, f.s, "svc/token")
	stepErr(t, err, errcode.SetupFailed, "login")
	a.noLeak(t, errText(err))
}

// A token given with --value replaces the flow's grant: its old refresh token must not later
// overwrite the given token.
func TestOAuthValueDropsOldGrant(t *testing.T) {
	a := newAuthServer(t)
	f := newFixture(t, a.step(""))
	if _, err := f.run(browser(t), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.run(nil, RunOptions{Force: true, Values: map[string]string{"login": "given-token"}}); err != nil {
		t.Fatal(err)
	}
	f.e.Now = func() time.Time { return time.Now().Add(5 * time.Hour) }
	if v, ok, err := f.e.FreshSecret(f.ctx, f.b, f.s, "svc/token"); v != "given-token" || !ok || err != nil {
		t.Fatalf("FreshSecret = %q %v %v, want the given token", v, ok, err)
	}
}

// A token endpoint that hangs on a refresh holds up only the calls that need that same token, and
// each of them only as long as its own context allows: another scope's live token is handed out
// at once (the refresh lock is per scope and slug, and never held while a token is live).
func TestOAuthRefreshHangIsolated(t *testing.T) {
	a := newAuthServer(t)
	f := newFixture(t, a.step(""))
	a.mu.Lock()
	a.expiresIn = 30 // within the refresh margin: alice's token is refreshed at its next use
	a.mu.Unlock()
	if _, err := f.run(browser(t), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.expiresIn = 3600
	a.mu.Unlock()
	bob := f.s
	bob.User = "bob"
	if _, err := f.e.Run(f.ctx, f.b, bob, f.env, browser(t), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	bobTok, _, _ := f.e.Secret(bob, "svc/token")

	release, arrived := make(chan struct{}), make(chan struct{}, 8)
	t.Cleanup(func() { close(release) }) // runs before the server's Close, which waits for handlers
	a.setToken(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable")
	})
	go func() { _, _, _ = f.e.FreshSecret(context.Background(), f.b, f.s, "svc/token") }()
	<-arrived // alice's refresh hangs at the token endpoint

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	begin := time.Now()
	if v, ok, err := f.e.FreshSecret(ctx, f.b, bob, "svc/token"); v != bobTok || !ok || err != nil {
		t.Fatalf("bob's live token: %q %v %v", v, ok, err)
	}
	if d := time.Since(begin); d > time.Second {
		t.Errorf("bob's live token waited %s behind alice's hanging refresh", d)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	begin = time.Now()
	_, _, err := f.e.FreshSecret(short, f.b, f.s, "svc/token")
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("a call with a 300ms context waited %s for alice's hanging refresh", d)
	}
	if err == nil {
		t.Error("an expired token whose refresh did not finish was handed out")
	}
	a.noLeak(t, errText(err))
}

// A grant is refreshed only at the token endpoint and for the client it was issued through: when
// the bundle's oauth block names another token_url or client_id (an update of the bundle, another
// bundle folder of the same id@major), its refresh token is sent nowhere and setup must run again.
func TestOAuthRefreshBoundToIssuer(t *testing.T) {
	for _, change := range []string{"token_url", "client_id"} {
		t.Run(change, func(t *testing.T) {
			a := newAuthServer(t)
			f := newFixture(t, a.step(""))
			if _, err := f.run(browser(t), RunOptions{}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var got []string
			thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = r.ParseForm()
				mu.Lock()
				got = append(got, r.PostForm.Encode())
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"access_token":"stolen","token_type":"Bearer","expires_in":3600}`))
			}))
			defer thief.Close()
			st := a.step("")
			if change == "token_url" {
				st.OAuth.TokenURL = thief.URL + "/token"
			} else {
				st.OAuth.ClientID = "other"
				a.setToken(func(w http.ResponseWriter, r *http.Request) {
					_ = r.ParseForm()
					mu.Lock()
					got = append(got, r.PostForm.Encode())
					mu.Unlock()
					oauthError(w, http.StatusBadRequest, "invalid_client")
				})
			}
			f.b.CLI.Setup = []manifest.SetupStep{st}
			f.e.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
			v, ok, err := f.e.FreshSecret(f.ctx, f.b, f.s, "svc/token")
			mu.Lock()
			defer mu.Unlock()
			if len(got) > 0 {
				t.Errorf("the refresh token went to the changed oauth block's endpoint: %q", got)
			}
			if err == nil || ok || v != "" {
				t.Fatalf("FreshSecret = %q %v %v, want an error asking for setup again", v, ok, err)
			}
			stepErr(t, err, errcode.SetupFailed, "login")
			if se, _ := err.(*StepError); se == nil || !strings.Contains(se.Hint, "setup") {
				t.Errorf("hint %v does not say to run setup again", err)
			}
		})
	}
}

// A token endpoint answering with an access or refresh token that is not RFC 6749's VSCHAR (%x20-7E:
// newlines, terminal escapes, NUL, other Unicode) or that is gigantic is refused, by the flow and by
// a refresh: such a token would go into a call's environment, argv or stdin as lines or escapes
// the CLI did not expect, and the host's redaction of it from outputs (which strip escapes first)
// would miss it. Nothing is stored.
func TestOAuthTokenCharacters(t *testing.T) {
	bad := map[string][2]string{
		"newline":      {"AT-7q\nINJECTED=1", "RT-7q"},
		"escape":       {"AT-7q\x1b[31mred", "RT-7q"},
		"nul":          {"AT-7q\x00x", "RT-7q"},
		"unicode":      {"AT-7q\u202eevil", "RT-7q"},
		"huge":         {"AT-7q" + strings.Repeat("A", 200<<10), "RT-7q"},
		"refresh-line": {"AT-7q", "RT-7q\nx"},
	}
	answer := func(access, refresh string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": access, "refresh_token": refresh, "token_type": "Bearer", "expires_in": 3600})
		}
	}
	for name, tok := range bad {
		t.Run(name, func(t *testing.T) {
			a := newAuthServer(t)
			a.setToken(answer(tok[0], tok[1]))
			f := newFixture(t, a.step(""))
			_, err := f.run(browser(t), RunOptions{})
			stepErr(t, err, errcode.SetupFailed, "login")
			if strings.Contains(errText(err), "AT-7q") || strings.Contains(errText(err), "RT-7q") {
				t.Errorf("error quotes the token: %q", errText(err))
			}
			if _, ok, _ := f.e.Secret(f.s, "svc/token"); ok {
				t.Fatal("the token was stored")
			}
			// A refresh answered the same way keeps nothing of it either.
			a.setToken(nil)
			if _, err := f.run(browser(t), RunOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
			good, _, _ := f.e.Secret(f.s, "svc/token")
			a.setToken(answer(tok[0], tok[1]))
			f.e.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
			v, _, err := f.e.FreshSecret(f.ctx, f.b, f.s, "svc/token")
			stepErr(t, err, errcode.SetupFailed, "login")
			if v != "" {
				t.Errorf("FreshSecret handed out %q", v)
			}
			if stored, _, _ := f.e.Secret(f.s, "svc/token"); stored != good {
				t.Errorf("the refreshed token was stored: %q", stored)
			}
		})
	}
}

// A callback run for given users answers only their connections, over IPv4 and IPv6 loopback: the
// owner of the connecting socket is looked up in /proc/net/tcp(6).
func TestCallbackOnlyUIDs(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "::1"} {
		for _, tc := range []struct {
			uid  int
			want int
		}{{os.Getuid() + 1, http.StatusForbidden}, {os.Getuid(), http.StatusOK}} {
			cb, err := listenCallback(host, "code", oauthCallbackPath, "st", []int{tc.uid})
			if err != nil {
				if host == "::1" {
					t.Skip("no IPv6 loopback")
				}
				t.Fatal(err)
			}
			resp, err := http.Get(cb.url + "?code=c&state=st")
			cb.close()
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s, callback for uid %d, request from uid %d: HTTP %d, want %d", host, tc.uid, os.Getuid(), resp.StatusCode, tc.want)
			}
		}
	}
}

// Calls racing on an expired token whose refresh fails share that one refresh's outcome: the token
// endpoint is asked once, and none of them waits for a refresh of its own after the first failed
// (with a hanging endpoint, the last of N calls waited N times the HTTP timeout).
func TestOAuthRefreshFailureShared(t *testing.T) {
	a := newAuthServer(t)
	f := newFixture(t, a.step(""))
	if _, err := f.run(browser(t), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	a.setToken(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		time.Sleep(time.Second)
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable")
	})
	f.e.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if v, _, err := f.e.FreshSecret(f.ctx, f.b, f.s, "svc/token"); err == nil || v != "" {
				t.Errorf("FreshSecret = %q %v, want the refresh's failure", v, err)
			}
		})
	}
	wg.Wait()
	if n := asked.Load(); n != 1 {
		t.Errorf("the token endpoint was asked %d times, want once", n)
	}
}
