package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/internal/agenttoken"
	"github.com/clihost/clihost/mcp"
)

var _ control.PageBackend = (*Engine)(nil)

// The status page's paths on the MCP listener.
const (
	pagePath  = "/"
	loginPath = "/login"
)

// withStatusPage serves the status page (GET /) and its login (GET /login?code=…) on the MCP
// listener, and passes every other request to next.
func (d *Engine) withStatusPage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != pagePath && r.URL.Path != loginPath {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the status page answers GET only", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == loginPath {
			d.servePageLogin(w, r)
			return
		}
		d.servePage(w, r)
	})
}

// pageRefusal is why a request may not see the page: the status and what the refusal page says.
type pageRefusal struct {
	status    int
	title     string
	message   string
	challenge string // the WWW-Authenticate header of a 401
}

// challenge is the WWW-Authenticate header of a 401; errText (RFC 6750's error, with its
// description) is empty when the request carried no credentials.
func challenge(errText, description string) string {
	c := `Bearer realm="clihostd"`
	if errText != "" {
		c += fmt.Sprintf(`, error=%q, error_description=%q`, errText, description)
	}
	return c
}

// servePage shows the status page to a request carrying the default bearer token, or a session
// cookie of `clihostctl open` from loopback; others get a page that says how to get in.
func (d *Engine) servePage(w http.ResponseWriter, r *http.Request) {
	if refusal := d.pageAccess(r); refusal != nil {
		d.writeRefusal(w, *refusal)
		return
	}
	nonce := newNonce()
	view := d.pageView(r.Context())
	view.Nonce = nonce
	var body bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&body, "page", view); err != nil {
		d.log.Error("status page", "err", err)
		http.Error(w, "the status page could not be rendered; the daemon's log says why", http.StatusInternalServerError)
		return
	}
	writePage(w, http.StatusOK, nonce, body.Bytes())
}

// pageAccess is nil when r may see the page, else why not.
func (d *Engine) pageAccess(r *http.Request) *pageRefusal {
	if refusal := rebound(r); refusal != nil {
		return refusal
	}
	if header := r.Header.Get("Authorization"); header != "" {
		name, ok := d.tokens.Match(header)
		switch {
		case !ok:
			msg := "The bearer token is not this daemon's token (mistyped, cut short, or another server's)."
			return &pageRefusal{http.StatusUnauthorized, "Wrong token", msg, challenge("invalid_token", "not this daemon's token")}
		case name != agenttoken.Default:
			return &pageRefusal{http.StatusForbidden, "An agent's token", "The token of agent " + name +
				" does not open the status page: the page shows every agent's calls. Use the daemon's own token, or clihostctl open.", ""}
		}
		return nil
	}
	c, err := r.Cookie(sessionCookie(r))
	if err != nil {
		return &pageRefusal{http.StatusUnauthorized, "Log in to see clihostd's status", "", challenge("", "")}
	}
	if !fromLoopback(r) {
		return &pageRefusal{http.StatusUnauthorized, "Session cookies work only on this machine",
			"A session of clihostctl open is accepted only from loopback. From elsewhere, send the bearer token.", challenge("", "")}
	}
	if !d.page.valid(c.Value, time.Now()) {
		return &pageRefusal{http.StatusUnauthorized, "Your session ended",
			"The session expired, or the daemon restarted since you logged in.", challenge("", "")}
	}
	return nil
}

// servePageLogin exchanges a login code of `clihostctl open` for a session cookie, from loopback
// only, once, before the code expires, and sends the browser on to the page.
func (d *Engine) servePageLogin(w http.ResponseWriter, r *http.Request) {
	if refusal := rebound(r); refusal != nil {
		d.writeRefusal(w, *refusal)
		return
	}
	if !fromLoopback(r) {
		d.writeRefusal(w, pageRefusal{http.StatusForbidden, "Log in from this machine",
			"Login links of clihostctl open work only from loopback. From elsewhere, send the bearer token.", ""})
		return
	}
	session, expires, ok := d.page.redeem(r.URL.Query().Get("code"), time.Now())
	if !ok {
		d.writeRefusal(w, pageRefusal{http.StatusUnauthorized, "This login link is used or expired",
			fmt.Sprintf("A link of clihostctl open works once, within %v.", pageCodeTTL), challenge("", "")})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie(r), Value: session, Path: "/", Expires: expires,
		MaxAge: int(pageSessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode})
	// Not a redirect: a browser that came from clihostctl open's file:// page is on a cross-site
	// navigation, on which it would not send the SameSite=Strict cookie; this origin's page
	// refreshing to the status page starts a same-site one.
	nonce := newNonce()
	var body bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&body, "loggedin", refusedView{Nonce: nonce}); err != nil {
		http.Redirect(w, r, pagePath, http.StatusSeeOther)
		return
	}
	writePage(w, http.StatusOK, nonce, body.Bytes())
}

// writeRefusal answers with the refusal page, which says how to get in.
func (d *Engine) writeRefusal(w http.ResponseWriter, f pageRefusal) {
	if f.challenge != "" {
		w.Header().Set("WWW-Authenticate", f.challenge)
	}
	nonce := newNonce()
	var body bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&body, "refused", refusedView{Nonce: nonce, Title: f.title, Message: f.message}); err != nil {
		http.Error(w, f.title, f.status)
		return
	}
	writePage(w, f.status, nonce, body.Bytes())
}

// writePage sends an HTML page with the headers every page of the status page carries: a CSP
// that allows only its own nonce's style (no script, no other resource), no framing, no caching,
// no sniffing, no referrer.
func writePage(w http.ResponseWriter, status int, nonce string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+nonce+"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	noStore(w)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// noStore keeps browsers and proxies from keeping an authenticated answer.
func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
}

// rebound refuses a request that arrived on a loopback address with a Host header naming
// something else: a page of another site whose name was rebound to 127.0.0.1.
func rebound(r *http.Request) *pageRefusal {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || !mcp.IsLoopback(local.String()) || mcp.IsLoopback(r.Host) {
		return nil
	}
	return &pageRefusal{http.StatusForbidden, "Wrong host name",
		"This page answers only to localhost or a loopback address on this machine.", ""}
}

// fromLoopback reports whether r came from this machine's loopback.
func fromLoopback(r *http.Request) bool { return mcp.IsLoopback(r.RemoteAddr) }

// sessionCookie is the session cookie's name, one per port: browsers keep cookies per host, not
// per port, and two daemons on one machine each keep their own.
func sessionCookie(r *http.Request) string {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, port, err := net.SplitHostPort(local.String()); err == nil {
			return "clihost_session_" + port
		}
	}
	return "clihost_session"
}

// newNonce is a CSP nonce: 16 random bytes, base64.
func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// PageLogin implements control.PageBackend: a one-time login URL of the status page, on a
// loopback address of the MCP listener.
func (d *Engine) PageLogin(context.Context) (control.PageLogin, error) {
	base, err := loopbackBase(d.httpURL)
	if err != nil {
		return control.PageLogin{}, err
	}
	code, expires := d.page.mintCode(time.Now())
	return control.PageLogin{URL: base + loginPath + "?code=" + code, Expires: expires}, nil
}

// loopbackBase is the listener's URL http://HOST:PORT as a browser on this machine reaches it: an
// unspecified address (0.0.0.0, ::) is reached on 127.0.0.1 or [::1]; a listener on another
// address has no loopback login.
func loopbackBase(listener string) (string, error) {
	hostport := strings.TrimPrefix(listener, "http://")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("the MCP listener is not serving yet")
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return "", fmt.Errorf("the MCP listener's address %s is not an IP address", hostport)
	case ip.IsLoopback():
	case ip.IsUnspecified() && ip.Is4():
		host = "127.0.0.1"
	case ip.IsUnspecified():
		host = "::1"
	default:
		return "", fmt.Errorf("the status page's login works only on loopback, and clihostd listens on %s (--http)", hostport)
	}
	return "http://" + net.JoinHostPort(host, port), nil
}
