package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGatewayErrors: a destination the policy allows but the network cannot reach is a gateway
// error (502 Bad Gateway; 504 Gateway Timeout when the lookup or the dial timed out), never the
// 403 of a policy refusal, which clients (Claude Code among them) report as an authentication
// failure. The upstream is a real loopback listener; the closed port is one that was listened
// on and closed; the unresolvable names fail in the policy's resolver and behind the DNS stub.
func TestGatewayErrors(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	slowPort := closed + 1
	if slowPort == f.port {
		slowPort++
	}
	f.pol.Ports = append(f.pol.Ports, closed, slowPort)
	f.pol.Allow = append(f.pol.Allow, "gone.example.test", "slowdns.example.test")
	resolve := f.pol.Resolver
	f.pol.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "gone.example.test":
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		case "slowdns.example.test":
			return nil, &net.DNSError{Err: "i/o timeout", Name: host, IsTimeout: true}
		}
		return resolve(ctx, host)
	}
	f.pol.Dial = func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
		if int(a.Port()) == slowPort { // a destination that never answers: the dial times out
			ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", a.String())
	}
	proxy := serve(t, f.pol.ServeHTTPProxy)
	p := strconv.Itoa(f.port)
	cases := []struct {
		target string
		code   int
		body   string
	}{
		{"api.example.test:" + p, http.StatusOK, ""},
		{"gone.example.test:" + p, http.StatusBadGateway, "lookup gone.example.test"},
		{"unresolved.example.test:" + p, http.StatusBadGateway, "no addresses"},
		{"slowdns.example.test:" + p, http.StatusGatewayTimeout, "lookup slowdns.example.test"},
		{"api.example.test:" + strconv.Itoa(closed), http.StatusBadGateway, "connection refused"},
		{"api.example.test:" + strconv.Itoa(slowPort), http.StatusGatewayTimeout, "deadline"},
		// Policy refusals stay 403.
		{"evil.test:" + p, http.StatusForbidden, "not in the egress allowlist"},
		{"meta.example.test:" + p, http.StatusForbidden, "metadata"},
		{"api.example.test:8081", http.StatusForbidden, "port 8081"},
	}
	for _, c := range cases {
		code, body, _, _ := connect(t, proxy, c.target)
		if code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("CONNECT %s: %d %q; want %d %q", c.target, code, body, c.code, c.body)
		}
	}
	// Absolute-form requests answer the same way.
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxy}), DisableKeepAlives: true}}
	for _, c := range cases[1:] {
		resp, err := client.Get("http://" + c.target + "/x")
		if err != nil {
			t.Fatalf("GET %s: %v", c.target, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("GET http://%s/: %d, want %d", c.target, resp.StatusCode, c.code)
		}
	}
	// SOCKS5: host unreachable for a name that does not resolve, not "not allowed".
	socksProxy := serve(t, f.pol.ServeSOCKS5)
	if code, _, _ := socks(t, socksProxy, "gone.example.test", f.port); code != socksHostUnreach {
		t.Errorf("SOCKS gone.example.test: reply %#x, want host unreachable", code)
	}
	if code, _, _ := socks(t, socksProxy, "evil.test", f.port); code != socksNotAllowed {
		t.Errorf("SOCKS evil.test: reply %#x, want not allowed", code)
	}
}

// TestGatewayErrorsThroughDNSStub: a client that resolves through the session's DNS stub gets
// a fake address for an allowed name (the stub does not resolve it); the CONNECT to that
// address is decided as the name, whose real lookup fails: 502, not 403.
func TestGatewayErrorsThroughDNSStub(t *testing.T) {
	f := newFixture(t)
	f.pol.AdmitNets = []netip.Prefix{netip.PrefixFrom(loopback, 32)}
	f.pol.Allow = append(f.pol.Allow, "gone.example.test")
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpLn, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	socksLn, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Listeners{HTTP: httpLn, SOCKS: socksLn, DNS: pc}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, f.pol, nil) }()
	t.Cleanup(func() { cancel(); <-done })
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	addrs, err := r.LookupHost(context.Background(), "gone.example.test")
	if err != nil || len(addrs) != 1 {
		t.Fatalf("stub lookup of an allowed name: %v, %v", addrs, err)
	}
	code, body, _, _ := connect(t, httpLn.Addr().String(), net.JoinHostPort(addrs[0], strconv.Itoa(f.port)))
	if code != http.StatusBadGateway || !strings.Contains(body, "lookup gone.example.test") {
		t.Fatalf("CONNECT to the fake address of an unresolvable name: %d %q; want 502", code, body)
	}
}

// TestGatewayBodiesHideResolution: what the proxy answers a sandboxed client names the host and
// port the client asked for and what went wrong, never what only the host's resolver knows: the
// resolver's own address (Go's DNS errors say "lookup x on 10.9.8.7:53"), the private addresses an
// allowed name resolves to, or the real address a dial failed on (a client behind the DNS stub
// knows only fake ones). The audit log (Policy.Log) keeps the whole reason. Each answer is
// checked for CONNECT and for absolute-form requests.
func TestGatewayBodiesHideResolution(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	f.pol.Ports = append(f.pol.Ports, closed)
	f.pol.Allow = append(f.pol.Allow, "gone.example.test", "slowdns.example.test", "intranet.example.test")
	resolve := f.pol.Resolver
	f.pol.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "gone.example.test":
			return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.9.8.7:53", IsNotFound: true}
		case "slowdns.example.test":
			return nil, &net.DNSError{Err: "i/o timeout", Name: host, Server: "10.9.8.7:53", IsTimeout: true}
		case "intranet.example.test":
			return []netip.Addr{netip.MustParseAddr("10.20.30.40"), netip.MustParseAddr("fd12:3456::7")}, nil
		}
		return resolve(ctx, host)
	}
	proxy := serve(t, f.pol.ServeHTTPProxy)
	p := strconv.Itoa(f.port)
	secret := []string{"10.9.8.7", "10.20.30.40", "fd12:3456::7", "127.0.0.1", "10.0.0.0/8", "Private-Use"}
	cases := []struct {
		target string
		code   int
		body   string
	}{
		{"gone.example.test:" + p, http.StatusBadGateway, "lookup gone.example.test"},
		{"slowdns.example.test:" + p, http.StatusGatewayTimeout, "lookup slowdns.example.test"},
		{"intranet.example.test:" + p, http.StatusForbidden, "intranet.example.test resolves only to refused addresses"},
		{"api.example.test:" + strconv.Itoa(closed), http.StatusBadGateway, "connection refused"},
	}
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxy}), DisableKeepAlives: true}}
	for _, c := range cases {
		code, body, _, _ := connect(t, proxy, c.target)
		resp, err := client.Get("http://" + c.target + "/x")
		if err != nil {
			t.Fatalf("GET %s: %v", c.target, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for form, got := range map[string]struct {
			code int
			body string
		}{"CONNECT": {code, body}, "GET": {resp.StatusCode, string(b)}} {
			if got.code != c.code || !strings.Contains(got.body, c.body) {
				t.Errorf("%s %s: %d %q; want %d %q", form, c.target, got.code, got.body, c.code, c.body)
			}
			for _, s := range secret {
				if strings.Contains(got.body, s) {
					t.Errorf("%s %s: the answer reveals %q: %q", form, c.target, s, got.body)
				}
			}
		}
	}
	// The audit log still has the whole story.
	f.mu.Lock()
	defer f.mu.Unlock()
	var logged []string
	for _, d := range f.logged {
		logged = append(logged, d.Reason)
	}
	all := strings.Join(logged, "\n")
	for _, s := range []string{"10.9.8.7", "10.20.30.40"} {
		if !strings.Contains(all, s) {
			t.Errorf("the logged decisions lost %q:\n%s", s, all)
		}
	}
}
