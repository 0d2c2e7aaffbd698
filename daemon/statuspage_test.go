package daemon

import (
	"context"
	"github.com/clihost/clihost/sandboxprobe"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// pageServer serves e's MCP listener (with its status page) on a loopback port, as Serve does,
// and records its URL where PageLogin reads it.
func pageServer(t *testing.T, e *Engine) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(e.withStatusPage(e.httpHandler()))
	t.Cleanup(srv.Close)
	e.httpURL = srv.URL
	return srv
}

// noRedirects is an HTTP client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// fetch GETs url with the Authorization header auth ("" for none) and cookies, returning the
// response and its body.
func fetch(t *testing.T, url, auth string, cookies ...*http.Cookie) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// checkPageHeaders fails t unless resp carries the headers every page of the status page must.
func checkPageHeaders(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	h := resp.Header
	csp := h.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "style-src 'nonce-") || strings.Contains(csp, "script-src") ||
		!strings.Contains(csp, "frame-ancestors 'none'") || h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" ||
		h.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Errorf("%s: headers %v", what, h)
	}
}

// TestStatusPageNeedsTheToken: without credentials the page answers 401 with a page that says how
// to get in (clihostctl open, the bearer token); a wrong token is refused as RFC 6750's
// invalid_token; an agent's own token is refused (the page shows every agent's calls); the
// daemon's token shows the page, with the security headers on every answer. Other methods are
// refused; the MCP endpoints and metrics stay as they were.
func TestStatusPageNeedsTheToken(t *testing.T) {
	e := testEngine(t, fixture.True(), nil)
	srv := pageServer(t, e)
	resp, body := fetch(t, srv.URL+"/", "")
	checkPageHeaders(t, "no token", resp)
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") ||
		!strings.Contains(body, "clihostctl open") || !strings.Contains(body, "clihostctl token") || strings.Contains(body, "true@1") {
		t.Errorf("no token: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
	resp, body = fetch(t, srv.URL+"/", "Bearer "+strings.Repeat("0", 64))
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) ||
		strings.Contains(body, "true@1") {
		t.Errorf("wrong token: %d %v", resp.StatusCode, resp.Header)
	}
	agent, err := e.CreateToken("ci-bot")
	if err != nil {
		t.Fatal(err)
	}
	resp, body = fetch(t, srv.URL+"/", "Bearer "+agent.Token)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(body, "true@1") || !strings.Contains(body, "ci-bot") {
		t.Errorf("an agent's token: %d\n%s", resp.StatusCode, body)
	}
	resp, body = fetch(t, srv.URL+"/", "Bearer "+e.Token().Token)
	checkPageHeaders(t, "the token", resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "true@1") || !strings.Contains(body, `<span class="ok">ready</span>`) {
		t.Errorf("the daemon's token: %d\n%s", resp.StatusCode, body)
	}
	post, err := http.Post(srv.URL+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", post.StatusCode)
	}
	if resp, _ := fetch(t, srv.URL+"/metrics", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("metrics without a token: %d", resp.StatusCode)
	}
	if resp, _ := fetch(t, srv.URL+"/metrics", "Bearer "+agent.Token); resp.StatusCode != http.StatusOK {
		t.Errorf("metrics with an agent's token: %d", resp.StatusCode)
	}
}

// TestStatusPageLogin: a login URL of PageLogin gives a session cookie (HttpOnly, SameSite=Strict,
// Path=/) once; used again, expired, unknown or empty it is refused. The cookie opens the page
// until its session expires, and only from loopback; a login from elsewhere is refused, and so
// is a request whose Host was rebound to a loopback address.
func TestStatusPageLogin(t *testing.T) {
	e := testEngine(t, fixture.True(), nil)
	srv := pageServer(t, e)
	login, err := e.PageLogin(context.Background())
	if err != nil || !strings.HasPrefix(login.URL, srv.URL+"/login?code=") || time.Until(login.Expires) > pageCodeTTL {
		t.Fatalf("PageLogin: %+v, %v", login, err)
	}
	resp, loggedIn := fetch(t, login.URL, "")
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		cookie = c
	}
	// Not a redirect: a browser sent here from a file:// page (clihostctl open) is on a cross-site
	// navigation and would not send the SameSite=Strict cookie on it; a page of this origin that
	// refreshes to / starts a same-site one.
	if resp.StatusCode != http.StatusOK || !strings.Contains(loggedIn, `content="0;url=/"`) || cookie == nil || !cookie.HttpOnly ||
		cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || len(cookie.Value) < 64 || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("login: %d %v", resp.StatusCode, resp.Header)
	}
	resp, body := fetch(t, srv.URL+"/", "", cookie)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "true@1") {
		t.Fatalf("the page with the session: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := fetch(t, login.URL, ""); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("the code used again: %d %v", resp.StatusCode, resp.Cookies())
	}
	old, _ := e.page.mintCode(time.Now().Add(-pageCodeTTL - time.Second))
	for name, code := range map[string]string{"expired": old, "unknown": randomSecret(), "empty": ""} {
		if resp, _ := fetch(t, srv.URL+"/login?code="+code, ""); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Errorf("%s code: %d %v", name, resp.StatusCode, resp.Cookies())
		}
	}
	forged := &http.Cookie{Name: cookie.Name, Value: randomSecret()}
	if resp, body := fetch(t, srv.URL+"/", "", forged); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "true@1") {
		t.Errorf("a forged session: %d", resp.StatusCode)
	}
	if e.page.valid(cookie.Value, time.Now().Add(pageSessionTTL+time.Second)) {
		t.Error("the session is valid after its lifetime")
	}

	// From another machine (a listener on all addresses): the cookie and the login are refused.
	h := e.withStatusPage(e.httpHandler())
	remote := func(path string, c *http.Cookie) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr, req.Host = "192.0.2.7:40000", "192.0.2.1:8931"
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 8931}))
		if c != nil {
			c.Name = "clihost_session_8931"
			req.AddCookie(c)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	l2, _ := e.PageLogin(context.Background())
	_, query, _ := strings.Cut(l2.URL, "?")
	if rec := remote("/login?"+query, nil); rec.Code != http.StatusForbidden || rec.Header().Get("Set-Cookie") != "" {
		t.Errorf("a login from another machine: %d %v", rec.Code, rec.Header())
	}
	if resp, _ := fetch(t, l2.URL, ""); resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		t.Errorf("a code refused from elsewhere (not used up there) does not work here: %d", resp.StatusCode)
	}
	if rec := remote("/", &http.Cookie{Value: cookie.Value}); rec.Code != http.StatusUnauthorized || strings.Contains(rec.Body.String(), "true@1") {
		t.Errorf("the session from another machine: %d", rec.Code)
	}
	if rec := remote("/", nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("no credentials from another machine: %d", rec.Code)
	}

	// DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.Host = "evil.example"
	req.AddCookie(cookie)
	if resp, err := noRedirects.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a rebound Host: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestStatusPageLoginURL: the login URL names a loopback address a browser on this machine
// reaches; a listener on another address has none.
func TestStatusPageLoginURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8931": "http://127.0.0.1:8931", "http://0.0.0.0:8931": "http://127.0.0.1:8931",
		"http://[::]:8931": "http://[::1]:8931", "http://[::1]:8931": "http://[::1]:8931", "http://192.0.2.1:8931": "", "": "",
	} {
		got, err := loopbackBase(in)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("loopbackBase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestSessionsBounded: codes and sessions are bounded; the oldest go first.
func TestSessionsBounded(t *testing.T) {
	var p pageSessions
	now := time.Now()
	var codes []string
	for i := range pageMaxCodes + 5 {
		c, _ := p.mintCode(now.Add(time.Duration(i) * time.Millisecond))
		codes = append(codes, c)
	}
	if len(p.codes) != pageMaxCodes {
		t.Errorf("%d codes kept, want %d", len(p.codes), pageMaxCodes)
	}
	if _, _, ok := p.redeem(codes[0], now); ok {
		t.Error("the oldest code survived the bound")
	}
	for i := range pageMaxSessions + 5 {
		c, _ := p.mintCode(now)
		if _, _, ok := p.redeem(c, now.Add(time.Duration(i)*time.Millisecond)); !ok {
			t.Fatal("a fresh code was refused")
		}
	}
	if len(p.sessions) != pageMaxSessions {
		t.Errorf("%d sessions kept, want %d", len(p.sessions), pageMaxSessions)
	}
}

// TestStatusPageEscapes: what bundles and the audit log hold reaches the page as text: HTML and
// script in a bundle's name and description, terminal escapes, bidi overrides and zero-width
// characters, a huge description, hostile audit lines (markup in a bundle id, escapes in a tool
// name); the argv template of an audit line never shows; a huge audit log is read from its end.
func TestStatusPageEscapes(t *testing.T) {
	hostile := "<script>document.title='pwned'</script><img src=x onerror=alert(1)>\\e]0;owned\\a\\e[2J\\u202eevil\\u200b" + strings.Repeat("A", 300_000)
	files := fixture.True()
	files["true/CLI.md"] = strings.Replace(strings.Replace(files["true/CLI.md"], "description: A coreutils program as a bundle, for tests.",
		`description: "`+hostile+`"`, 1), "name: Fixture true", `name: "</title><script>alert(2)</script>"`, 1)
	e := testEngine(t, files, nil)
	srv := pageServer(t, e)
	var audit strings.Builder
	for range 20_000 { // ~2.6 MB of old calls: the page reads the end
		audit.WriteString(`{"type":"cli.invoked","call_id":"c_old","cli_id":"old","subcommand":"old","ok":true,"ts":"2026-01-01T00:00:00Z","argv_template":"x"}` + "\n")
	}
	audit.WriteString(`{"type":"cli.invoked","call_id":"c_1","cli_id":"<script>alert(3)</script>","subcommand":"\u001b[31mrun\u202e","argv_template":"SECRET-TEMPLATE ${input.x}","duration_ms":7,"ok":false,"error_code":"approval_denied","ts":"2026-11-26T07:00:00Z"}` + "\n")
	audit.WriteString(`{"type":"cli.egress","call_id":"c_1","cli_id":"evil","host":"<b>evil.example</b>","port":443,"allowed":false,"reason":"not in egress","via":"connect","ts":"2026-11-26T07:00:00Z"}` + "\n")
	audit.WriteString("not json <script>\n")
	if _, err := e.audit.Write([]byte(audit.String())); err != nil {
		t.Fatal(err)
	}
	resp, body := fetch(t, srv.URL+"/", "Bearer "+e.Token().Token)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("page: %d\n%s", resp.StatusCode, body)
	}
	for _, bad := range []string{"<script", "<img", "<b>", "\x1b", "\u202e", "\u200b", "\a", "SECRET-TEMPLATE", "</title><script"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q as it is", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;document.title=", `\u001b]0;owned\u0007`, `\u202eevil\u200b`, "bytes more)",
		"&lt;script&gt;alert(3)&lt;/script&gt;", `\u001b[31mrun\u202e`, "refused", "approval_denied", "&lt;b&gt;evil.example&lt;/b&gt;:443",
		"<title>clihostd status</title>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if len(body) > 200_000 {
		t.Errorf("the page is %d bytes: huge strings are not cut", len(body))
	}
	if n := strings.Count(body, `<tr class="call">`); n != pageRows {
		t.Errorf("%d calls shown, want the last %d", n, pageRows)
	}
}

// TestShown: the page's text filter, character by character.
func TestShown(t *testing.T) {
	for in, want := range map[string]string{
		"plain text":           "plain text",
		"a\x1b[31mb":           `a\u001b[31mb`,
		"\u202e\u2066x":        `\u202e\u2066x`,
		"tab\there":            `tab\u0009here`,
		"bad \xff utf8":        `bad \xff utf8`,
		"tag\U000E0041":        `tag\U000e0041`,
		"nbsp\u00a0x":          `nbsp\u00a0x`,
		"éü 日本":                "éü 日本",
		"c1\u0085x":            `c1\u0085x`,
		strings.Repeat("x", 5): "xxx…(2 bytes more)",
	} {
		limit := 100
		if strings.HasPrefix(in, "xxxxx") {
			limit = 3
		}
		if got := shown(in, limit); got != want {
			t.Errorf("shown(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPageLimitNotEnforced: the page's limits table says a limit the host cannot hold is not
// enforced, instead of a mechanism "none" beside "1 GiB" that reads as a limit in force.
func TestPageLimitNotEnforced(t *testing.T) {
	for l, want := range map[sandboxprobe.LimitMechanism]string{
		{Limit: "memory", Value: "1 GiB", Mechanism: "none"}:  "NOT enforced on this host",
		{Limit: "cpu", Value: "none", Mechanism: "none"}:      "none",
		{Limit: "pids", Value: "256", Mechanism: "cgroup v2"}: "cgroup v2",
	} {
		if got := limitOf(l).Mechanism; got != want {
			t.Errorf("%+v: mechanism shown %q, want %q", l, got, want)
		}
	}
}
