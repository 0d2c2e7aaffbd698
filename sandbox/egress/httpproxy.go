package egress

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"time"
)

// ServeHTTPProxy runs an HTTP proxy on ln until ctx is done (it then returns nil) or ln
// fails. It accepts two request forms:
//   - CONNECT host:port: checked, then tunnelled to the checked address; a policy refusal is
//     a 403 whose body is the reason; an allowed name that does not resolve, or a dial that
//     fails, is a 502 (504 when the lookup or the dial timed out).
//   - absolute-form http:// requests (GET http://host/path, any method): checked, then
//     forwarded to the checked address, with hop-by-hop headers and Proxy-Authorization
//     removed; refusals and failures are answered as for CONNECT.
//
// Anything else (origin-form requests, https:// absolute form, userinfo in the target) is a
// 400. Every decision is passed to Log. A request's line and headers must arrive within
// HeadTimeout; a connection idle between requests is closed after a minute, a CONNECT tunnel
// idle for IdleTimeout too; connections past MaxConns are refused (see Policy.limit).
func (p *Policy) ServeHTTPProxy(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           &httpProxy{p: p, ctx: ctx},
		ReadHeaderTimeout: p.headTimeout(),
		IdleTimeout:       keepAliveTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// A connection is tracked from its acceptance (StateNew is reported before Serve
		// can return) to its close; a hijacked one, by the CONNECT handler (see connect).
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				p.begin()
			case http.StateClosed:
				p.end()
			}
		},
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	err := srv.Serve(p.limit(ln, "http"))
	// Serve also returns when ln is closed under it (Serve closes every listener when its
	// context ends), possibly before the AfterFunc ran; the deferred stop would then cancel
	// it and leave kept-alive connections open for keepAliveTimeout. Close them here.
	srv.Close()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

type httpProxy struct {
	p   *Policy
	ctx context.Context // lifetime of tunnels, which outlive the http.Server's tracking
}

func (h *httpProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		h.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" || r.URL.User != nil || r.URL.Host == "" {
		http.Error(w, "egress proxy: only CONNECT and absolute-form http:// requests are accepted", http.StatusBadRequest)
		return
	}
	host, port := r.URL.Hostname(), 80
	if ps := r.URL.Port(); ps != "" {
		var err error
		if port, err = parsePort(ps); err != nil {
			http.Error(w, "egress proxy: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	d := h.p.decide(r.Context(), "http", host, port)
	if !d.Allowed {
		http.Error(w, "egress proxy: "+d.answer(), refusalStatus(d))
		return
	}
	// A fake address of the DNS stub was decided as its name: the upstream gets the name.
	authority := ""
	if a, err := netip.ParseAddr(host); err == nil && d.Host != a.Unmap().String() {
		authority = d.Host
		if ps := r.URL.Port(); ps != "" {
			authority = net.JoinHostPort(d.Host, ps)
		}
	}
	rp := &httputil.ReverseProxy{
		// ReverseProxy strips hop-by-hop headers, Proxy-Authorization among them, and,
		// with Rewrite, any Forwarded/X-Forwarded-* the client sent.
		Rewrite: func(pr *httputil.ProxyRequest) {
			if authority != "" {
				pr.Out.URL.Host = authority
			}
			pr.Out.Host = "" // the Host header is the checked URL's host
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return h.p.dial(ctx, d)
			},
			DisableKeepAlives:     true,
			ResponseHeaderTimeout: h.p.idleTimeout(),
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, gatewayText(d.Host, d.Port, err), gatewayStatus(err))
		},
	}
	rp.ServeHTTP(w, r)
}

// connect handles CONNECT host:port. The authority is taken from the raw request target:
// net/http would read "a:443@b:443" as userinfo "a:443" and host "b".
func (h *httpProxy) connect(w http.ResponseWriter, r *http.Request) {
	host, ps, err := net.SplitHostPort(r.RequestURI)
	var port int
	if err == nil {
		port, err = parsePort(ps)
	}
	if err != nil {
		http.Error(w, "egress proxy: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	d := h.p.decide(r.Context(), "connect", host, port)
	if !d.Allowed {
		http.Error(w, "egress proxy: "+d.answer(), refusalStatus(d))
		return
	}
	up, err := h.p.dial(r.Context(), d)
	if err != nil {
		http.Error(w, gatewayText(d.Host, d.Port, err), gatewayStatus(err))
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		http.Error(w, "egress proxy: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer h.p.end() // the server no longer reports this connection's close
	_ = conn.SetDeadline(time.Time{})
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		conn.Close()
		up.Close()
		return
	}
	// Bytes the client sent after the CONNECT request (a pipelined TLS ClientHello, say)
	// may sit in rw.Reader; splice forwards them before reading conn directly.
	pending, _ := rw.Reader.Peek(rw.Reader.Buffered())
	splice(h.ctx, conn, pending, up, h.p.idleTimeout())
}
