package setup

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
)

const (
	prefixOAuth        = "oauth/"    // oauth/<slug>: the grant behind secret/<slug> (refresh token, expiry)
	oauthCallbackPath  = "/callback" // the redirect URI's path on the loopback callback server
	oauthHTTPTimeout   = 30 * time.Second
	oauthRefreshMargin = time.Minute // a token expiring sooner than this is refreshed first
	maxUserCode        = 64          // runes of a device flow's user code
	maxDeviceInterval  = 60          // seconds between device-flow polls, at most
	maxTokenBytes      = 32 << 10    // an access or refresh token's length, at most
)

// DeviceCodeShower is what an Answerer implements to show a device flow (RFC 8628) to the person:
// the verification URI to open and the user code to type there. Like Visit, it may return at once
// or block until ctx is done (cancelled once the flow ended). A surface without it cannot run a
// device_code step.
type DeviceCodeShower interface {
	ShowDeviceCode(ctx context.Context, step manifest.SetupStep, verificationURI, userCode string) error
}

// oauthGrant is what the secret store keeps beside an oauth step's access token (under
// oauth/<slug>): what refreshing it needs, and the token endpoint and client it was issued
// through, the only ones its refresh token is ever sent to.
type oauthGrant struct {
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	TokenURL     string    `json:"token_url,omitempty"`
	ClientID     string    `json:"client_id,omitempty"`
}

// oauth gets an oauth step's access token: from Values (a token obtained elsewhere, stored
// without a grant), else by driving the step's flow. The grant (refresh token, expiry) is stored
// under oauth/<slug>; the caller stores the token under secret/<slug>.
func (r *runState) oauth(ctx context.Context, st manifest.SetupStep) (string, error) {
	if st.SecretSlug == "" {
		return "", failed(st, "an oauth step needs secret_slug", "name the secret slot the token lands in", nil)
	}
	if v, ok := r.o.Values[st.ID]; ok {
		if v == "" {
			return "", failed(st, "the given value is empty", "give the access token the flow produces", nil)
		}
		// A token obtained elsewhere: no grant, so that an earlier flow's refresh token never
		// replaces it.
		return v, r.storeGrant(st, &oauth2.Token{})
	}
	cfg, err := oauthConfig(st.OAuth)
	if err != nil {
		return "", failed(st, err.Error(), "declare the flow: oauth: {flow, client_id, authorization_url or device_authorization_url, token_url, scopes}", nil)
	}
	if r.ans == nil {
		return "", required(st)
	}
	timeout := timeoutMS(st.OAuth.TimeoutMS, DefaultCallbackTimeout)
	ctx = context.WithValue(ctx, oauth2.HTTPClient, oauthClient())
	var tok *oauth2.Token
	if st.OAuth.Flow == manifest.FlowDeviceCode {
		tok, err = r.deviceCode(ctx, st, cfg, timeout)
	} else {
		tok, err = r.authCode(ctx, st, cfg, timeout)
	}
	if err != nil {
		return "", err
	}
	if err := checkToken(tok); err != nil {
		return "", failed(st, "the token endpoint's answer is unusable: "+err.Error(), "check the step's token_url; the provider's tokens must be printable ASCII", nil)
	}
	if err := r.storeGrant(st, tok); err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

// checkToken refuses an access or refresh token that is not RFC 6749's VSCHAR (%x20-7E, appendix
// A.12 and A.17) or longer than maxTokenBytes: it goes into a call's environment, argv or stdin,
// where a newline, an escape or a NUL would be read as something else, and outputs are redacted
// of it only as it is.
func checkToken(tok *oauth2.Token) error {
	for name, v := range map[string]string{"access_token": tok.AccessToken, "refresh_token": tok.RefreshToken} {
		if len(v) > maxTokenBytes {
			return fmt.Errorf("its %s is longer than %d bytes", name, maxTokenBytes)
		}
		if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			return fmt.Errorf("its %s has characters other than printable ASCII", name)
		}
	}
	return nil
}

// authCode runs the authorization code flow with PKCE: the person authorizes at the
// authorization URL (ans.Visit), which redirects to the host's loopback callback with the code and
// the state; the code is exchanged with the verifier.
func (r *runState) authCode(ctx context.Context, st manifest.SetupStep, cfg *oauth2.Config, timeout time.Duration) (*oauth2.Token, error) {
	state := randomToken()
	cb, err := listenCallback(r.e.CallbackHost, "code", oauthCallbackPath, state, r.o.CallbackUIDs)
	if err != nil {
		return nil, failed(st, err.Error(), "set the engine's CallbackHost to a loopback address", err)
	}
	defer cb.close()
	cfg.RedirectURL = cb.url
	verifier := oauth2.GenerateVerifier()
	u := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))
	code, err := r.await(ctx, st, cb, timeout, func(ctx context.Context) error { return r.ans.Visit(ctx, st, u) })
	if err != nil {
		return nil, err
	}
	xctx, cancel := context.WithTimeout(ctx, oauthHTTPTimeout)
	defer cancel()
	tok, err := cfg.Exchange(xctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, tokenErr(st, "token endpoint", err)
	}
	return tok, nil
}

// deviceCode runs the device authorization grant (RFC 8628): the person is shown the verification
// URI and user code (DeviceCodeShower) while the host polls the token endpoint at the server's
// interval (5 s more after each slow_down) until a token, a refusal, or the code's expiry.
func (r *runState) deviceCode(ctx context.Context, st manifest.SetupStep, cfg *oauth2.Config, timeout time.Duration) (*oauth2.Token, error) {
	shower, ok := r.ans.(DeviceCodeShower)
	if !ok {
		return nil, failed(st, "this surface cannot show a device code", "run `clihostctl setup` in a terminal", nil)
	}
	actx, cancel := context.WithTimeout(ctx, oauthHTTPTimeout)
	da, err := cfg.DeviceAuth(actx)
	cancel()
	if err != nil {
		return nil, tokenErr(st, "device authorization endpoint", err)
	}
	if err := checkDeviceAuth(da); err != nil {
		return nil, failed(st, "the device authorization endpoint's answer is unusable: "+err.Error(), "check device_authorization_url", nil)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sctx, stopShow := context.WithCancel(pctx)
	shown := make(chan error, 1)
	go func() { shown <- shower.ShowDeviceCode(sctx, st, da.VerificationURI, da.UserCode) }()
	tok, err := cfg.DeviceAccessToken(pctx, da)
	stopShow()
	if serr := <-shown; serr != nil && err != nil && ctx.Err() == nil && !errors.Is(serr, context.Canceled) {
		return nil, answerErr(ctx, st, serr)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, failed(st, fmt.Sprintf("cancelled: %v", context.Cause(ctx)), "run setup again", nil)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, failed(st, "the device code expired before the authorization was completed", "run setup again and complete the authorization in time", nil)
		}
		return nil, tokenErr(st, "token endpoint", err)
	}
	return tok, nil
}

// checkDeviceAuth refuses a device authorization response that cannot be shown safely or polled.
func checkDeviceAuth(da *oauth2.DeviceAuthResponse) error {
	switch {
	case da.DeviceCode == "":
		return errors.New("no device_code")
	case da.UserCode == "" || printable(da.UserCode, maxUserCode) != da.UserCode:
		return errors.New("the user_code is empty, too long or not printable")
	case da.Interval < 0 || da.Interval > maxDeviceInterval:
		return fmt.Errorf("the interval is not between 0 and %d seconds", maxDeviceInterval)
	}
	if err := manifest.CheckOAuthEndpoint("verification_uri", da.VerificationURI); err != nil {
		return err
	}
	if printable(da.VerificationURI, 2048) != da.VerificationURI {
		return errors.New("the verification_uri is too long or not printable")
	}
	return nil
}

// storeGrant keeps what refreshing tok needs under oauth/<slug>, with the endpoint and client of
// the step's flow.
func (r *runState) storeGrant(st manifest.SetupStep, tok *oauth2.Token) error {
	grant := oauthGrant{RefreshToken: tok.RefreshToken, Expiry: tok.Expiry.UTC()}
	if st.OAuth != nil {
		grant.TokenURL, grant.ClientID = st.OAuth.TokenURL, st.OAuth.ClientID
	}
	g, _ := json.Marshal(grant)
	return r.store(st, prefixOAuth+st.SecretSlug, string(g))
}

// oauthConfig checks f (manifest.OAuthFlow.Check) and returns its oauth2 configuration: a public
// client, whose client_id travels in the request body.
func oauthConfig(f *manifest.OAuthFlow) (*oauth2.Config, error) {
	if f == nil {
		return nil, errors.New("the oauth step declares no flow")
	}
	if err := f.Check(); err != nil {
		return nil, err
	}
	return &oauth2.Config{ClientID: f.ClientID, Scopes: f.Scopes,
		Endpoint: oauth2.Endpoint{TokenURL: f.TokenURL, AuthURL: f.AuthorizationURL, DeviceAuthURL: f.DeviceAuthorizationURL, AuthStyle: oauth2.AuthStyleInParams}}, nil
}

// oauthClient is the HTTP client of the flows: bounded in time, following no redirect (a token
// endpoint that redirects could send the code or refresh token elsewhere).
func oauthClient() *http.Client {
	return &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		Timeout:   oauthHTTPTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the OAuth endpoint answered with a redirect, which clihost does not follow")
		},
	}
}

// tokenErr describes a failed request to an OAuth endpoint without anything the server sent back
// but its status and OAuth error code: an error response's body may echo credentials. The cause is
// not kept for the same reason.
func tokenErr(st manifest.SetupStep, endpoint string, err error) *StepError {
	hint := "run setup again; if it fails again, check the step's oauth block (client_id, URLs, scopes)"
	var re *oauth2.RetrieveError
	var ue *url.Error
	switch {
	case errors.As(err, &re):
		msg := fmt.Sprintf("the %s refused the request (HTTP %d", endpoint, re.Response.StatusCode)
		if re.ErrorCode != "" {
			msg += fmt.Sprintf(", error %q", printable(re.ErrorCode, 64))
		}
		switch re.ErrorCode {
		case "expired_token":
			return failed(st, "the device code expired before the authorization was completed", "run setup again and complete the authorization in time", nil)
		case "access_denied":
			hint = "the authorization was denied: run setup again and approve it"
		}
		return failed(st, msg+")", hint, nil)
	case errors.As(err, &ue):
		return failed(st, fmt.Sprintf("cannot reach the %s: %s", endpoint, printable(ue.Err.Error(), 200)), hint, nil)
	case errors.Is(err, context.DeadlineExceeded):
		return failed(st, fmt.Sprintf("the %s did not answer in time", endpoint), hint, nil)
	}
	return failed(st, fmt.Sprintf("the %s's answer is not a usable token response", endpoint), hint, nil)
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails since Go 1.24
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// FreshSecret is Secret for a slug an oauth step fills: when the stored access token has expired
// (or expires within a minute) and its grant kept a refresh token, it is refreshed at the step's
// token endpoint first and the new token (and refresh token, when the server rotates it) stored.
// A slug no oauth step fills, or a token without expiry, is returned as stored. One refresh of a
// scope's slug runs at a time (a rotated refresh token is used once), bounded by
// oauthHTTPTimeout and not by any one caller: the calls needing it share its outcome, each
// waiting only as long as its own ctx allows; a live token never waits.
func (e *Engine) FreshSecret(ctx context.Context, b *manifest.Bundle, s lifecycle.Scope, slug string) (string, bool, error) {
	st, found := oauthStep(b, slug)
	if !found {
		return e.Secret(s, slug)
	}
	cur, ok, due, err := e.dueToken(s, slug)
	if err != nil || !ok || !due {
		return cur, ok, err
	}
	f := e.refreshes.join(s.Key()+"\x00"+slug, func() (string, error) {
		// A refresh that ended since dueToken read the grant left a live token.
		if cur, ok, due, err := e.dueToken(s, slug); err != nil || !ok || !due {
			if err == nil && !ok {
				err = failed(st, "the token is no longer stored", fmt.Sprintf("run `clihostctl setup %s`", b.ID()), nil)
			}
			return cur, err
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), oauthHTTPTimeout)
		defer cancel()
		v, _, err := e.refresh(rctx, b, st, s, slug)
		return v, err
	})
	select {
	case <-f.done:
		if f.err != nil {
			return "", false, f.err
		}
		return f.token, true, nil
	case <-ctx.Done():
		return "", false, failed(st, "the access token expired and its refresh did not end in time", "call again", nil)
	}
}

// flight is one refresh in progress; done is closed once token or err is set.
type flight struct {
	done  chan struct{}
	token string
	err   error
}

// flights are the refreshes in progress, by scope and slug.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// join returns the refresh of key in progress, or starts do as it.
func (fs *flights) join(key string, do func() (string, error)) *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[key]; f != nil {
		return f
	}
	if fs.m == nil {
		fs.m = map[string]*flight{}
	}
	f := &flight{done: make(chan struct{})}
	fs.m[key] = f
	go func() {
		f.token, f.err = do()
		fs.mu.Lock()
		delete(fs.m, key)
		fs.mu.Unlock()
		close(f.done)
	}()
	return f
}

// dueToken reads slug's token under s and whether it must be refreshed before use: its grant has
// an expiry within oauthRefreshMargin.
func (e *Engine) dueToken(s lifecycle.Scope, slug string) (cur string, ok, due bool, err error) {
	cur, ok, err = e.Secret(s, slug)
	if err != nil || !ok {
		return cur, ok, false, err
	}
	raw, gok, err := e.getSecret(s, prefixOAuth+slug)
	if err != nil || !gok {
		return cur, true, false, err
	}
	var g oauthGrant
	if json.Unmarshal([]byte(raw), &g) != nil || g.Expiry.IsZero() || e.now().Add(oauthRefreshMargin).Before(g.Expiry) {
		return cur, true, false, nil
	}
	return cur, true, true, nil
}

// refresh exchanges slug's stored refresh token for a new access token and stores both.
func (e *Engine) refresh(ctx context.Context, b *manifest.Bundle, st manifest.SetupStep, s lifecycle.Scope, slug string) (string, bool, error) {
	raw, _, err := e.getSecret(s, prefixOAuth+slug)
	if err != nil {
		return "", false, err
	}
	var g oauthGrant
	_ = json.Unmarshal([]byte(raw), &g) // dueToken parsed it
	if g.RefreshToken == "" {
		return "", false, failed(st, "the access token expired and the server gave no refresh token", fmt.Sprintf("run `clihostctl setup %s --force`", b.ID()), nil)
	}
	if g.TokenURL != st.OAuth.TokenURL || g.ClientID != st.OAuth.ClientID {
		// The bundle changed its oauth block since setup: the refresh token stays with the
		// endpoint and client that issued it.
		return "", false, failed(st, "the access token expired and the step's oauth block names another token_url or client_id than the one it was issued through",
			fmt.Sprintf("run `clihostctl setup %s --force`", b.ID()), nil)
	}
	cfg, err := oauthConfig(st.OAuth)
	if err != nil {
		return "", false, failed(st, err.Error(), "fix the step's oauth block", nil)
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, oauthClient())
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: g.RefreshToken, Expiry: g.Expiry}).Token()
	if err != nil {
		return "", false, tokenErr(st, "token endpoint (refresh)", err)
	}
	if err := checkToken(tok); err != nil {
		return "", false, failed(st, "the token endpoint's refresh answer is unusable: "+err.Error(), "check the step's token_url; the provider's tokens must be printable ASCII", nil)
	}
	r := &runState{e: e, b: b, s: s}
	if err := r.store(st, prefixSecret+slug, tok.AccessToken); err != nil {
		return "", false, err
	}
	if err := r.storeGrant(st, tok); err != nil {
		return "", false, err
	}
	return tok.AccessToken, true, nil
}

// oauthStep is the oauth step of b that fills slug with a flow it declares.
func oauthStep(b *manifest.Bundle, slug string) (manifest.SetupStep, bool) {
	for _, st := range b.CLI.Setup {
		if st.Kind == manifest.StepOAuth && st.SecretSlug == slug && st.OAuth != nil {
			return st, true
		}
	}
	return manifest.SetupStep{}, false
}
