package setup

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/clihost/clihost/manifest"
)

// closeGrace bounds how long a closing callback server waits for the request in flight.
const closeGrace = 2 * time.Second

// callbackURLRE matches the ${callback_url} placeholder of a step's url.
var callbackURLRE = regexp.MustCompile(`\$\{\s*callback_url\s*\}`)

// callbackResult is what the one accepted callback request carried.
type callbackResult struct {
	value string
	err   error // the flow reported an error (an OAuth-style error parameter)
}

// callback is a single-use loopback HTTP server for one external or oauth step. It accepts exactly
// one GET on its path (unguessable for external steps) carrying param (or an error parameter) and,
// for an oauth step, the login's state; a wrong path gets 404, a connection of a user other than
// the one running setup (when the run names it) 403, a Host or Origin that is not this
// loopback listener 403, another method 405, a request without the parameter or with another state
// 400 (and does not use the callback up), and any request after the accepted one 410.
type callback struct {
	url    string // http://127.0.0.1:port/callback/<token>
	path   string
	port   string
	param  string
	state  string              // when set, a request must carry it as its state parameter (OAuth)
	uids   []int               // when set, the only users whose connections it answers
	result chan callbackResult // receives the accepted request's result; buffered

	mu   sync.Mutex
	used bool

	srv    *http.Server
	served chan struct{} // closed when Serve returned
}

// startCallback listens on host (a loopback IP) on a free port, on an unguessable path, for the
// users uids (empty: anyone).
func startCallback(host, param string, uids []int) (*callback, error) {
	var tok [32]byte
	_, _ = rand.Read(tok[:]) // crypto/rand never fails since Go 1.24
	return listenCallback(host, param, "/callback/"+base64.RawURLEncoding.EncodeToString(tok[:]), "", uids)
}

// listenCallback listens on host (a loopback IP) on a free port for one request to path from one
// of the users uids (empty: anyone); a non-empty state must come back as the request's state
// parameter.
func listenCallback(host, param, path, state string, uids []int) (*callback, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("callback host %q is not a loopback IP address", host)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("callback server: %w", err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	c := &callback{
		path:   path,
		port:   port,
		param:  param,
		state:  state,
		uids:   uids,
		result: make(chan callbackResult, 1),
		served: make(chan struct{}),
	}
	c.url = "http://" + ln.Addr().String() + c.path
	c.srv = &http.Server{
		Handler:           c,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		_ = c.srv.Serve(ln) // returns http.ErrServerClosed after close
		close(c.served)
	}()
	return c, nil
}

// close stops the server: no new connections, the request in flight (the accepted one, whose
// result the engine may already hold) still gets its answer, for at most closeGrace.
func (c *callback) close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil {
		_ = c.srv.Close()
	}
	<-c.served
}

func (c *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	reply := func(code int, msg string) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, msg+"\n")
	}
	if subtle.ConstantTimeCompare([]byte(r.URL.Path), []byte(c.path)) != 1 {
		reply(http.StatusNotFound, "not found")
		return
	}
	if local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr); !peerAllowed(c.uids, local, r.RemoteAddr) {
		// Another local user, who may have read the URL and state from a browser's argv: refused,
		// and it does not use the callback up.
		reply(http.StatusForbidden, "forbidden: this callback only answers the user who runs setup")
		return
	}
	if !c.loopbackHost(r.Host) || !c.loopbackOrigin(r.Header.Get("Origin")) {
		reply(http.StatusForbidden, "forbidden: this callback only answers requests to its loopback address")
		return
	}
	if r.Method != http.MethodGet {
		h.Set("Allow", http.MethodGet)
		reply(http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	q := r.URL.Query()
	value, flowErr := q.Get(c.param), q.Get("error")
	if value == "" && flowErr == "" {
		reply(http.StatusBadRequest, fmt.Sprintf("missing the %q parameter", c.param))
		return
	}
	if c.state != "" && subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(c.state)) != 1 {
		// A forged or stale redirect (CSRF): refused, and it does not use the callback up.
		reply(http.StatusBadRequest, "the state parameter does not match this login")
		return
	}
	c.mu.Lock()
	used := c.used
	c.used = true
	c.mu.Unlock()
	if used {
		reply(http.StatusGone, "this callback was already used")
		return
	}
	if flowErr != "" {
		c.result <- callbackResult{err: fmt.Errorf("the callback reported error %q", printable(flowErr, 100))}
		reply(http.StatusOK, "The flow reported an error. Return to the terminal.")
		return
	}
	c.result <- callbackResult{value: value}
	reply(http.StatusOK, "Done. You can close this window.")
}

// loopbackHost reports whether a Host header names this listener by a loopback name.
func (c *callback) loopbackHost(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	return err == nil && port == c.port && manifest.IsLoopbackHost(host)
}

// loopbackOrigin accepts no Origin, or this listener's own http origin.
func (c *callback) loopbackOrigin(origin string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && u.Port() == c.port && manifest.IsLoopbackHost(u.Hostname()) && (u.Path == "" || u.Path == "/")
}

// printable shortens s to n runes and drops control characters, for quoting untrusted text.
func printable(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if n == 0 {
			b.WriteString("…")
			break
		}
		if unicode.IsPrint(r) {
			b.WriteRune(r)
			n--
		}
	}
	return b.String()
}

// visitURL is the URL to show for an external step: the step's url with the callback URL in it (at
// ${callback_url}, query-escaped, else as a redirect_uri parameter), or the callback URL itself when
// the step has no url.
func visitURL(stepURL, cb string) (string, error) {
	if stepURL == "" {
		return cb, nil
	}
	raw := stepURL
	has := callbackURLRE.MatchString(raw)
	if has {
		raw = callbackURLRE.ReplaceAllLiteralString(raw, url.QueryEscape(cb))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("url %q: %w", stepURL, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return "", errors.New("url " + strconv.Quote(stepURL) + " is not an absolute http(s) URL")
	}
	if !has {
		q := u.Query()
		q.Set("redirect_uri", cb)
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}
