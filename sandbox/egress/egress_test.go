package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var (
	loopback = netip.MustParseAddr("127.0.0.1")
	loopNet  = netip.MustParsePrefix("127.0.0.0/8")
)

// fixture is a destination server on 127.0.0.1 and a policy whose stub resolver maps the
// test names; no test contacts anything but loopback or performs real DNS.
type fixture struct {
	srv     *httptest.Server
	port    int
	pol     *Policy
	mu      sync.Mutex
	lookups map[string]int
	logged  []Decision
	gotHdr  http.Header
	gotHost string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{lookups: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.gotHdr, f.gotHost = r.Header.Clone(), r.Host
		f.mu.Unlock()
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	t.Cleanup(f.srv.Close)
	f.port = f.srv.Listener.Addr().(*net.TCPAddr).Port
	names := map[string][]netip.Addr{
		"api.example.test":        {loopback},
		"x.cdn.example.test":      {loopback},
		"cdn.example.test":        {loopback},
		"meta.example.test":       {netip.MustParseAddr("169.254.169.254")},
		"meta6.example.test":      {netip.MustParseAddr("fd00:ec2::254")},
		"mapped.example.test":     {netip.MustParseAddr("::ffff:10.0.0.1")},
		"mixed.example.test":      {netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("127.0.0.2")},
		"evil.test":               {loopback},
		"nat64.example.test":      {netip.MustParseAddr("64:ff9b::a9fe:a9fe")},
		"unresolved.example.test": nil,
	}
	f.pol = &Policy{
		Allow:     []string{"api.example.test", "*.cdn.example.test", "meta.example.test", "meta6.example.test", "mapped.example.test", "mixed.example.test", "nat64.example.test", "unresolved.example.test"},
		Ports:     []int{f.port},
		AdmitNets: []netip.Prefix{loopNet},
		Resolver: func(_ context.Context, host string) ([]netip.Addr, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.lookups[host]++
			a, ok := names[host]
			if !ok {
				return nil, errors.New("no such host (stub)")
			}
			return a, nil
		},
		Log: func(d Decision) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.logged = append(f.logged, d)
		},
	}
	return f
}

func (f *fixture) lookupCount(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups[host]
}

func (f *fixture) lastLog(t *testing.T) Decision {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.logged) == 0 {
		t.Fatal("no decision logged")
	}
	return f.logged[len(f.logged)-1]
}

// serve starts one of the proxies on a loopback listener, for the rest of the test, and returns
// its address.
func serve(t testing.TB, run func(context.Context, net.Listener) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v", err)
		}
	})
	return ln.Addr().String()
}

// getOver sends a GET for path over an established tunnel and returns the body.
func getOver(t *testing.T, c net.Conn, br *bufio.Reader, path string) string {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n", path)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// connect issues CONNECT target and returns the response status and the connection.
func connect(t *testing.T, proxy, target string) (int, string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	body := ""
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	}
	return resp.StatusCode, body, c, br
}

// socks performs a SOCKS5 no-auth CONNECT to host:port (as a domain name, or as an address
// when host parses as one) and returns the reply code.
func socks(t *testing.T, proxy, host string, port int) (byte, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	br := bufio.NewReader(c)
	c.Write([]byte{5, 1, 0})
	var m [2]byte
	if _, err := io.ReadFull(br, m[:]); err != nil || m != [2]byte{5, 0} {
		t.Fatalf("method reply %v, %v", m, err)
	}
	req := []byte{5, 1, 0}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is4() {
			req = append(append(req, 1), a.AsSlice()...)
		} else {
			req = append(append(req, 4), a.AsSlice()...)
		}
	} else {
		req = append(append(req, 3, byte(len(host))), host...)
	}
	req = append(req, byte(port>>8), byte(port))
	c.Write(req)
	var rep [10]byte
	if _, err := io.ReadFull(br, rep[:]); err != nil {
		t.Fatalf("reading SOCKS reply: %v", err)
	}
	return rep[1], c, br
}

func TestCheck(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		host    string
		port    int // 0 means the fixture's port
		allowed bool
		reason  string // substring of Decision.Reason
	}{
		{"api.example.test", 0, true, "allowed by api.example.test"},
		{"API.Example.TEST.", 0, true, "allowed by api.example.test"},
		{"x.cdn.example.test", 0, true, "allowed by *.cdn.example.test"},
		{"X.CDN.example.test", 0, true, "allowed by *.cdn.example.test"},
		{"cdn.example.test", 0, false, "not in the egress allowlist"},
		{"evil.test", 0, false, "not in the egress allowlist"},
		{"api.example.test", 8081, false, "port 8081 is not allowed"},
		{"api.example.test:443@evil.test", 0, false, "not a hostname"},
		{"evil.test@api.example.test", 0, false, "not a hostname"},
		{"evil#.api.example.test", 0, false, "not a hostname"},
		{"evil%2e.api.example.test", 0, false, "not a hostname"},
		{"api.example.test ", 0, false, "not a hostname"},
		{"api..example.test", 0, false, "not a valid hostname label"},
		{"*.cdn.example.test", 0, false, "not a hostname"},
		{"xn--bcher-kva.example.test", 0, false, "not in the egress allowlist"},
		{"bücher.example.test", 0, false, "not ASCII"},
		{"", 0, false, "empty host"},
		{"127.1", 0, false, "numeric IPv4"},
		{"2130706433", 0, false, "numeric IPv4"},
		{"10.0.0.1", 0, false, "IP literal"},
		{"[::1]", 0, false, "IP literal ::1"},           // not in 127.0.0.0/8
		{"127.0.0.1", 0, false, "IP literal 127.0.0.1"}, // even in an admitted network
		{"::ffff:127.0.0.1", 0, false, "IP literal 127.0.0.1"},
		{"meta.example.test", 0, false, "169.254.169.254 (cloud metadata address)"},
		{"meta6.example.test", 0, false, "fd00:ec2::254 (cloud metadata address)"},
		{"mapped.example.test", 0, false, "10.0.0.1 (Private-Use 10.0.0.0/8, RFC 1918)"},
		{"nat64.example.test", 0, false, "64:ff9b::a9fe:a9fe (IPv4-IPv6 Translat. 64:ff9b::/96, RFC 6052, embedding 169.254.169.254 (cloud metadata address))"},
		{"unresolved.example.test", 0, false, "no addresses"},
	} {
		port := tc.port
		if port == 0 {
			port = f.port
		}
		addr, d := f.pol.Check(ctx, tc.host, port)
		if d.Allowed != tc.allowed || !strings.Contains(d.Reason, tc.reason) {
			t.Errorf("Check(%q, %d) = allowed %v, %q; want %v, %q", tc.host, port, d.Allowed, d.Reason, tc.allowed, tc.reason)
		}
		if d.Allowed != addr.IsValid() || addr != d.Addr {
			t.Errorf("Check(%q): addr %v, decision addr %v", tc.host, addr, d.Addr)
		}
	}
	// A name reached only through a refused lookup is never looked up.
	if n := f.lookupCount("evil.test"); n != 0 {
		t.Errorf("evil.test looked up %d times", n)
	}
}

func TestCheckWithoutAdmitNets(t *testing.T) {
	f := newFixture(t)
	f.pol.AdmitNets = nil
	for host, want := range map[string]string{
		"api.example.test":   "127.0.0.1 (Loopback 127.0.0.0/8, RFC 1122 §3.2.1.3)",
		"mixed.example.test": "10.1.2.3 (Private-Use 10.0.0.0/8, RFC 1918); 127.0.0.2 (Loopback 127.0.0.0/8, RFC 1122 §3.2.1.3)",
		"127.0.0.1":          "IP literal",
	} {
		_, d := f.pol.Check(context.Background(), host, f.port)
		if d.Allowed || !strings.Contains(d.Reason, want) {
			t.Errorf("Check(%q) = %v, %q; want refusal %q", host, d.Allowed, d.Reason, want)
		}
	}
}

func TestCheckFirstAcceptableAddress(t *testing.T) {
	f := newFixture(t)
	f.pol.AdmitNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
	addr, d := f.pol.Check(context.Background(), "mixed.example.test", f.port)
	if !d.Allowed || addr != netip.MustParseAddr("127.0.0.2") {
		t.Fatalf("Check = %v %v %q; want 127.0.0.2 (10.1.2.3 is private)", d.Allowed, addr, d.Reason)
	}
}

func TestCheckDefaultPorts(t *testing.T) {
	p := &Policy{Allow: []string{"ports.test"}, AdmitNets: []netip.Prefix{loopNet},
		Resolver: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}}
	for port, want := range map[int]bool{80: true, 443: true, 22: false, 8080: false} {
		if _, d := p.Check(context.Background(), "ports.test", port); d.Allowed != want {
			t.Errorf("port %d: allowed %v, want %v (%s)", port, d.Allowed, want, d.Reason)
		}
	}
}

func TestCONNECT(t *testing.T) {
	f := newFixture(t)
	proxy := serve(t, f.pol.ServeHTTPProxy)
	target := "API.example.test.:" + strconv.Itoa(f.port)
	code, body, c, br := connect(t, proxy, target)
	if code != http.StatusOK {
		t.Fatalf("CONNECT %s: %d %s", target, code, body)
	}
	if got := getOver(t, c, br, "/tunnel"); got != "hello /tunnel" {
		t.Fatalf("through the tunnel: %q", got)
	}
	d := f.lastLog(t)
	if !d.Allowed || d.Via != "connect" || d.Host != "api.example.test" || d.Addr != loopback {
		t.Errorf("logged %+v", d)
	}
	if n := f.lookupCount("api.example.test"); n != 1 {
		t.Errorf("resolver called %d times for one connection, want 1", n)
	}
}

func TestCONNECTRefused(t *testing.T) {
	f := newFixture(t)
	proxy := serve(t, f.pol.ServeHTTPProxy)
	p := strconv.Itoa(f.port)
	for target, want := range map[string]string{
		"evil.test:" + p:         "not in the egress allowlist",
		"cdn.example.test:" + p:  "not in the egress allowlist",
		"api.example.test:8081":  "port 8081 is not allowed",
		"meta.example.test:" + p: "metadata",
		"10.0.0.1:" + p:          "IP literal",
	} {
		code, body, _, _ := connect(t, proxy, target)
		if code != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("CONNECT %s: %d %q; want 403 %q", target, code, body, want)
		}
		if d := f.lastLog(t); d.Allowed || d.Via != "connect" {
			t.Errorf("CONNECT %s logged %+v", target, d)
		}
	}
	// Confusable targets never reach the policy: "a:443@b:443" is not an authority, and
	// net/http itself rejects the others (the policy would too, see TestCheck).
	for _, target := range []string{
		"api.example.test:" + p + "@evil.test:" + p,
		"evil.test%23.api.example.test:" + p,
		"evil.test#.api.example.test:" + p,
		"user@api.example.test:" + p,
	} {
		if code, _, _, _ := connect(t, proxy, target); code != http.StatusBadRequest {
			t.Errorf("CONNECT %s: %d, want 400", target, code)
		}
	}
	if n := f.lookupCount("evil.test"); n != 0 {
		t.Errorf("refused name looked up %d times", n)
	}
}

func TestAbsoluteFormHTTP(t *testing.T) {
	f := newFixture(t)
	proxy := serve(t, f.pol.ServeHTTPProxy)
	pu := &url.URL{Scheme: "http", Host: proxy, User: url.UserPassword("tok", "secret")}
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	defer client.CloseIdleConnections()
	host := "api.example.test:" + strconv.Itoa(f.port)

	resp, err := client.Get("http://" + host + "/abs")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "hello /abs" {
		t.Fatalf("GET via proxy: %d %q", resp.StatusCode, b)
	}
	f.mu.Lock()
	hdr, gotHost := f.gotHdr, f.gotHost
	f.mu.Unlock()
	if hdr.Get("Proxy-Authorization") != "" || hdr.Get("Proxy-Connection") != "" {
		t.Errorf("proxy headers forwarded: %v", hdr)
	}
	if gotHost != host {
		t.Errorf("destination saw Host %q, want %q", gotHost, host)
	}
	if d := f.lastLog(t); !d.Allowed || d.Via != "http" {
		t.Errorf("logged %+v", d)
	}

	resp, err = client.Get("http://evil.test:" + strconv.Itoa(f.port) + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "not in the egress allowlist") {
		t.Errorf("GET evil.test: %d %q", resp.StatusCode, b)
	}
}

func TestHTTPProxyBadRequests(t *testing.T) {
	f := newFixture(t)
	proxy := serve(t, f.pol.ServeHTTPProxy)
	p := strconv.Itoa(f.port)
	for _, line := range []string{
		"GET /origin-form HTTP/1.1",
		"GET https://api.example.test:" + p + "/ HTTP/1.1",
		"GET http://api.example.test:" + p + "@evil.test:" + p + "/ HTTP/1.1",
	} {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "%s\r\nHost: api.example.test\r\n\r\n", line)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: %d, want 400", line, resp.StatusCode)
		}
	}
}

func TestSOCKS5(t *testing.T) {
	f := newFixture(t)
	proxy := serve(t, f.pol.ServeSOCKS5)
	code, c, br := socks(t, proxy, "x.CDN.example.test.", f.port)
	if code != socksOK {
		t.Fatalf("SOCKS CONNECT x.cdn.example.test: reply %#x", code)
	}
	if got := getOver(t, c, br, "/socks"); got != "hello /socks" {
		t.Fatalf("through SOCKS: %q", got)
	}
	if d := f.lastLog(t); !d.Allowed || d.Via != "socks5" || d.Host != "x.cdn.example.test" {
		t.Errorf("logged %+v", d)
	}
	if n := f.lookupCount("x.cdn.example.test"); n != 1 {
		t.Errorf("resolver called %d times for one connection, want 1", n)
	}
}

func TestSOCKS5Refused(t *testing.T) {
	f := newFixture(t)
	proxy := serve(t, f.pol.ServeSOCKS5)
	for _, tc := range []struct {
		host string
		port int
	}{
		{"evil.test", f.port},
		{"cdn.example.test", f.port},
		{"api.example.test", 8081},
		{"meta.example.test", f.port},
		{"10.0.0.1", f.port},
		{"api.example.test:443@evil.test", f.port},
	} {
		code, _, _ := socks(t, proxy, tc.host, tc.port)
		if code != socksNotAllowed {
			t.Errorf("SOCKS %s:%d: reply %#x, want 0x02", tc.host, tc.port, code)
		}
		if d := f.lastLog(t); d.Allowed || d.Via != "socks5" {
			t.Errorf("SOCKS %s logged %+v", tc.host, d)
		}
	}
	// An IPv4 request (ATYP 1) goes through the same Check, which never allows an address as
	// such, even in an admitted network.
	if code, _, _ := socks(t, proxy, "127.0.0.1", f.port); code == socksOK {
		t.Errorf("IPv4 literal in an admitted network: reply %#x", code)
	}
}

func TestSOCKS5Protocol(t *testing.T) {
	f := newFixture(t)
	proxy := serve(t, f.pol.ServeSOCKS5)
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	// Username/password only: no acceptable method.
	c, br := dial()
	c.Write([]byte{5, 1, 2})
	var m [2]byte
	if _, err := io.ReadFull(br, m[:]); err != nil || m != [2]byte{5, 0xff} {
		t.Errorf("method reply %v %v, want 05 ff", m, err)
	}
	// BIND is not supported.
	c, br = dial()
	c.Write([]byte{5, 1, 0, 5, 2, 0, 3, 1, 'a', 0, 80})
	var rep [12]byte
	if _, err := io.ReadFull(br, rep[:]); err != nil || rep[3] != socksCmdUnsupp {
		t.Errorf("BIND reply %v %v, want code 0x07", rep, err)
	}
}
