package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsQuery packs a query for name and type t (class IN unless class is given).
func dnsQuery(t *testing.T, id uint16, name string, typ dnsmessage.Type, class ...dnsmessage.Class) []byte {
	t.Helper()
	c := dnsmessage.ClassINET
	if len(class) > 0 {
		c = class[0]
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: c}); err != nil {
		t.Fatal(err)
	}
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// parseDNS unpacks a response.
func parseDNS(t *testing.T, msg []byte) dnsmessage.Message {
	t.Helper()
	var m dnsmessage.Message
	if err := m.Unpack(msg); err != nil {
		t.Fatalf("unpack response %x: %v", msg, err)
	}
	return m
}

// sessionPolicy returns a copy of the fixture's policy with a fresh fake-address table, as
// Serve makes.
func sessionPolicy(f *fixture) *Policy {
	pol := *f.pol
	pol.fake = newFakeIPs(FakeNet)
	return &pol
}

func TestDNSAnswers(t *testing.T) {
	f := newFixture(t)
	p := sessionPolicy(f)
	first := netip.MustParseAddr("127.65.0.1")

	// A for an allowed name: a fake address, stable for the session, TTL 0, the question
	// echoed as sent (case included).
	for i, name := range []string{"API.example.test.", "api.example.test."} {
		m := parseDNS(t, p.dnsAnswer(dnsQuery(t, uint16(7+i), name, dnsmessage.TypeA)))
		if m.ID != uint16(7+i) || !m.Response || m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 {
			t.Fatalf("A %s: %+v", name, m)
		}
		if m.Questions[0].Name.String() != name {
			t.Errorf("question echoed as %s, want %s", m.Questions[0].Name, name)
		}
		a, ok := m.Answers[0].Body.(*dnsmessage.AResource)
		if !ok || netip.AddrFrom4(a.A) != first || m.Answers[0].Header.TTL != 0 {
			t.Fatalf("A %s answered %+v, want %s with TTL 0", name, m.Answers[0], first)
		}
	}
	if d := f.lastLog(t); !d.Allowed || d.Via != "dns" || d.Host != "api.example.test" || d.Addr != first {
		t.Errorf("logged %+v", d)
	}
	m := parseDNS(t, p.dnsAnswer(dnsQuery(t, 1, "x.cdn.example.test.", dnsmessage.TypeA)))
	if a := m.Answers[0].Body.(*dnsmessage.AResource); netip.AddrFrom4(a.A) != first.Next() {
		t.Errorf("second name got %v, want %s", a.A, first.Next())
	}

	// Other types for an allowed name: NODATA. Refused names: NXDOMAIN, and logged.
	for _, tc := range []struct {
		name  string
		typ   dnsmessage.Type
		class dnsmessage.Class
		rcode dnsmessage.RCode
	}{
		{"api.example.test.", dnsmessage.TypeAAAA, dnsmessage.ClassINET, dnsmessage.RCodeSuccess},
		{"api.example.test.", dnsmessage.TypeMX, dnsmessage.ClassINET, dnsmessage.RCodeSuccess},
		{"api.example.test.", dnsmessage.TypeA, dnsmessage.ClassCHAOS, dnsmessage.RCodeRefused},
		{"evil.test.", dnsmessage.TypeA, dnsmessage.ClassINET, dnsmessage.RCodeNameError},
		{"c2VjcmV0.evil.test.", dnsmessage.TypeTXT, dnsmessage.ClassINET, dnsmessage.RCodeNameError},
		{"cdn.example.test.", dnsmessage.TypeA, dnsmessage.ClassINET, dnsmessage.RCodeNameError},
		{"_http._tcp.api.example.test.", dnsmessage.TypeSRV, dnsmessage.ClassINET, dnsmessage.RCodeNameError},
		{"127.0.0.1.", dnsmessage.TypeA, dnsmessage.ClassINET, dnsmessage.RCodeNameError},
		{"9.9.65.127.in-addr.arpa.", dnsmessage.TypePTR, dnsmessage.ClassINET, dnsmessage.RCodeNameError},
	} {
		m := parseDNS(t, p.dnsAnswer(dnsQuery(t, 3, tc.name, tc.typ, tc.class)))
		if m.RCode != tc.rcode || len(m.Answers) != 0 || len(m.Questions) != 1 {
			t.Errorf("%v %s: rcode %v, %d answers; want %v and none", tc.typ, tc.name, m.RCode, len(m.Answers), tc.rcode)
		}
		if tc.rcode == dnsmessage.RCodeNameError && tc.typ != dnsmessage.TypePTR {
			if d := f.lastLog(t); d.Allowed || d.Via != "dns" || !strings.Contains(d.Reason, "NXDOMAIN") {
				t.Errorf("%s logged %+v", tc.name, d)
			}
		}
	}

	// PTR of a fake address handed out: the name.
	m = parseDNS(t, p.dnsAnswer(dnsQuery(t, 4, "1.0.65.127.in-addr.arpa.", dnsmessage.TypePTR)))
	if len(m.Answers) != 1 || m.Answers[0].Body.(*dnsmessage.PTRResource).PTR.String() != "api.example.test." {
		t.Errorf("PTR answered %+v", m.Answers)
	}

	// Not a single standard query.
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 5, OpCode: 2})
	notify, _ := b.Finish()
	if m := parseDNS(t, p.dnsAnswer(notify)); m.RCode != dnsmessage.RCodeNotImplemented {
		t.Errorf("opcode 2: %v", m.RCode)
	}
	b = dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 6})
	b.StartQuestions()
	for _, n := range []string{"api.example.test.", "evil.test."} {
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(n), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	}
	two, _ := b.Finish()
	if m := parseDNS(t, p.dnsAnswer(two)); m.RCode != dnsmessage.RCodeFormatError || len(m.Answers) != 0 {
		t.Errorf("two questions: %v, %d answers", m.RCode, len(m.Answers))
	}
	resp := p.dnsAnswer(dnsQuery(t, 8, "api.example.test.", dnsmessage.TypeA))
	if p.dnsAnswer(resp) != nil || p.dnsAnswer([]byte{1, 2, 3}) != nil {
		t.Error("a response or a truncated header was answered")
	}
	// Nothing was ever resolved: the stub only consults the allowlist.
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.lookups) != 0 {
		t.Errorf("the DNS stub resolved names: %v", f.lookups)
	}
}

func TestFakeIPsExhausted(t *testing.T) {
	f := newFakeIPs(netip.MustParsePrefix("127.65.0.0/30"))
	var got []string
	for _, n := range []string{"a.test", "b.test", "c.test"} {
		if a, ok := f.assign(n); ok {
			got = append(got, a.String())
		}
	}
	if want := []string{"127.65.0.1", "127.65.0.2"}; !slices.Equal(got, want) {
		t.Fatalf("handed out %v, want %v (neither the first nor the last address)", got, want)
	}
	if a, ok := f.assign("a.test"); !ok || a.String() != "127.65.0.1" {
		t.Errorf("a known name after exhaustion: %v %v", a, ok)
	}
	if n, ok := f.name(netip.MustParseAddr("127.65.0.2")); !ok || n != "b.test" {
		t.Errorf("name(127.65.0.2) = %q %v", n, ok)
	}
}

// captureFixture serves the transparent capture on listeners bound to the fake addresses of
// api.example.test and evil.test (assigned directly: the stub would not hand out the latter)
// and to 127.0.0.1 (a destination the DNS stub never handed out), all on one port: the test
// cannot bind the real capture ports on 0.0.0.0. Upstream connections go to the given server
// (plain or TLS) whatever the checked address.
type captureFixture struct {
	*fixture
	fakeAddr, evilAddr, otherAddr string // host:port of the capture listeners
	dialed                        []netip.AddrPort
}

func newCaptureFixture(t *testing.T, upstream *httptest.Server, tlsPorts bool) *captureFixture {
	t.Helper()
	cf := &captureFixture{fixture: newFixture(t)}
	p := sessionPolicy(cf.fixture)
	fake, _ := p.fake.assign("api.example.test")
	evil, _ := p.fake.assign("evil.test")
	lnFake, err := net.Listen("tcp4", net.JoinHostPort(fake.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := lnFake.Addr().(*net.TCPAddr).Port
	lns := []net.Listener{lnFake}
	for _, a := range []string{evil.String(), "127.0.0.1"} {
		ln, err := net.Listen("tcp4", net.JoinHostPort(a, strconv.Itoa(port)))
		if err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	cf.fakeAddr, cf.evilAddr, cf.otherAddr = lns[0].Addr().String(), lns[1].Addr().String(), lns[2].Addr().String()
	p.Ports = []int{port}
	p.Dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
		cf.mu.Lock()
		cf.dialed = append(cf.dialed, addr)
		cf.mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, "tcp", upstream.Listener.Addr().String())
	}
	sni := 0
	if tlsPorts {
		sni = port
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, ln := range lns {
		wg.Go(func() {
			if err := p.serveCapture(ctx, ln, sni); err != nil {
				t.Errorf("serveCapture: %v", err)
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return cf
}

func TestCapture(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream %s %s", r.Host, r.URL.Path)
	}))
	defer upstream.Close()
	cf := newCaptureFixture(t, upstream, false)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	resp, err := client.Get("http://" + cf.fakeAddr + "/captured")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "upstream " + cf.fakeAddr + " /captured"; string(body) != want {
		t.Fatalf("through the capture: %q, want %q", body, want)
	}
	d := cf.lastLog(t)
	if !d.Allowed || d.Via != "capture" || d.Host != "api.example.test" || d.Addr != loopback || !strings.Contains(d.Reason, cf.fakeAddr) {
		t.Errorf("logged %+v", d)
	}
	cf.mu.Lock()
	dialed := slices.Clone(cf.dialed)
	cf.mu.Unlock()
	if port := netip.MustParseAddrPort(cf.fakeAddr).Port(); !slices.Equal(dialed, []netip.AddrPort{netip.AddrPortFrom(loopback, port)}) {
		t.Errorf("dialed %v, want the checked address 127.0.0.1:%d only", dialed, port)
	}

	// A destination the stub never handed out, and a fake name the allowlist refuses.
	if _, err := client.Get("http://" + cf.otherAddr + "/"); err == nil {
		t.Error("a connection to a non-fake destination was served")
	}
	if d := cf.lastLog(t); d.Allowed || !strings.Contains(d.Reason, "not an address the DNS stub handed out") {
		t.Errorf("logged %+v", d)
	}
	if _, err := client.Get("http://" + cf.evilAddr + "/"); err == nil {
		t.Error("a connection to a fake address of a refused name was served")
	}
	if d := cf.lastLog(t); d.Allowed || d.Host != "evil.test" || !strings.Contains(d.Reason, "not in the egress allowlist") {
		t.Errorf("logged %+v", d)
	}
}

// clientHello returns the bytes a crypto/tls client sends first for serverName.
func clientHello(t *testing.T, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		c := tls.Client(b, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
		c.Handshake()
		b.Close()
	}()
	var hdr [5]byte
	if _, err := io.ReadFull(a, hdr[:]); err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(a, rec); err != nil {
		t.Fatal(err)
	}
	return append(hdr[:], rec...)
}

// readHello feeds data to readClientHello through a real connection pair.
func readHello(t *testing.T, data []byte, timeout time.Duration) ([]byte, []string, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c.Write(data)
	return readClientHello(s, timeout)
}

func TestReadClientHello(t *testing.T) {
	hello := clientHello(t, "API.example.test")
	read, names, err := readHello(t, hello, time.Second)
	if err != nil || !bytes.Equal(read, hello) || !slices.Equal(names, []string{"API.example.test"}) {
		t.Fatalf("whole ClientHello: %d bytes read of %d, names %q, %v", len(read), len(hello), names, err)
	}
	// The same handshake message split over three records.
	body := hello[5:]
	var split []byte
	for _, part := range [][]byte{body[:3], body[3:100], body[100:]} {
		split = append(split, 0x16, 3, 1, byte(len(part)>>8), byte(len(part)))
		split = append(split, part...)
	}
	read, names, err = readHello(t, split, time.Second)
	if err != nil || !bytes.Equal(read, split) || !slices.Equal(names, []string{"API.example.test"}) {
		t.Fatalf("fragmented ClientHello: %d bytes of %d, names %q, %v", len(read), len(split), names, err)
	}
	// No server name (an IP address target): allowed through, nothing to compare.
	if _, names, err := readHello(t, clientHello(t, ""), time.Second); err != nil || len(names) != 0 {
		t.Fatalf("ClientHello without SNI: names %q, %v", names, err)
	}
	// Not TLS: returned as read, no error.
	if read, names, err := readHello(t, []byte("SSH-2.0-OpenSSH_9.2\r\n"), time.Second); err != nil || string(read) != "SSH-2.0-OpenSSH_9.2\r\n" || names != nil {
		t.Fatalf("SSH banner: %q %q %v", read, names, err)
	}
	// A client that waits for the server: nothing read, no error, after the timeout.
	if read, _, err := readHello(t, nil, 50*time.Millisecond); err != nil || len(read) != 0 {
		t.Fatalf("silent client: %q %v", read, err)
	}
	// Broken handshakes.
	for name, data := range map[string][]byte{
		"truncated":     hello[:len(hello)-10],
		"not a hello":   {0x16, 3, 1, 0, 4, 2, 0, 0, 0},
		"bad length":    {0x16, 3, 1, 0xff, 0xff},
		"alert inside":  append(append([]byte{}, split[:5+3]...), 0x15, 3, 1, 0, 2, 2, 40),
		"bad extension": corruptExtensions(hello),
	} {
		if _, _, err := readHello(t, data, 100*time.Millisecond); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// corruptExtensions returns hello with its extensions' total length one byte too long.
func corruptExtensions(hello []byte) []byte {
	h := bytes.Clone(hello)
	body := h[9:]
	off := 2 + 32
	off += 1 + int(body[off])
	off += 2 + (int(body[off])<<8 | int(body[off+1]))
	off += 1 + int(body[off])
	n := int(body[off])<<8 | int(body[off+1]) + 1
	body[off], body[off+1] = byte(n>>8), byte(n)
	return h
}

func TestCaptureSNI(t *testing.T) {
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls upstream %s", r.TLS.ServerName)
	}))
	defer upstream.Close()
	cf := newCaptureFixture(t, upstream, true)
	get := func(serverName string) (string, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: serverName, InsecureSkipVerify: true}, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + cf.fakeAddr + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get("api.example.test"); err != nil || body != "tls upstream api.example.test" {
		t.Fatalf("matching SNI: %q, %v", body, err)
	}
	if d := cf.lastLog(t); !d.Allowed || d.Via != "capture" {
		t.Errorf("logged %+v", d)
	}
	if body, err := get("evil.test"); err == nil {
		t.Fatalf("SNI evil.test through api.example.test's address was served: %q", body)
	}
	if d := cf.lastLog(t); d.Allowed || !strings.Contains(d.Reason, `TLS server name "evil.test" does not match api.example.test`) {
		t.Errorf("logged %+v", d)
	}
	if body, err := get(""); err != nil || body != "tls upstream " {
		t.Fatalf("no SNI: %q, %v", body, err)
	}
}

func TestServe(t *testing.T) {
	f := newFixture(t)
	f.pol.AdmitNets = []netip.Prefix{netip.PrefixFrom(loopback, 32)} // not the fake range
	var (
		mu     sync.Mutex
		logged []Decision
	)
	listen := func() net.Listener {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Listeners{HTTP: listen(), SOCKS: listen(), DNS: pc}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, l, f.pol, func(d Decision) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, d)
		})
	}()

	// Go's own resolver, pointed at the stub, accepts its answers.
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	addrs, err := r.LookupHost(context.Background(), "api.example.test")
	if err != nil || !slices.Equal(addrs, []string{"127.65.0.1"}) {
		t.Fatalf("LookupHost(api.example.test) = %v, %v; want [127.65.0.1]", addrs, err)
	}
	var dnsErr *net.DNSError
	if _, err := r.LookupHost(context.Background(), "evil.test"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Fatalf("LookupHost(evil.test) = %v; want not found", err)
	}

	// The proxies take the fake address in place of the name (socks5://, which resolves
	// on the client side).
	code, c, br := socks(t, l.SOCKS.Addr().String(), "127.65.0.1", f.port)
	if code != socksOK {
		t.Fatalf("SOCKS to the fake address: reply %#x", code)
	}
	if got := getOver(t, c, br, "/fake"); got != "hello /fake" {
		t.Fatalf("through SOCKS: %q", got)
	}
	if status, body, _, _ := connect(t, l.HTTP.Addr().String(), "127.65.0.1:"+strconv.Itoa(f.port)); status != http.StatusOK {
		t.Fatalf("CONNECT to the fake address: %d %s", status, body)
	}
	pu := &url.URL{Scheme: "http", Host: l.HTTP.Addr().String()}
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}}
	resp, err := client.Get("http://127.65.0.1:" + strconv.Itoa(f.port) + "/abs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f.mu.Lock()
	gotHost := f.gotHost
	f.mu.Unlock()
	if resp.StatusCode != http.StatusOK || gotHost != "api.example.test:"+strconv.Itoa(f.port) {
		t.Fatalf("absolute-form GET of the fake address: %d, upstream saw Host %q", resp.StatusCode, gotHost)
	}
	if code, _, _, _ := connect(t, l.HTTP.Addr().String(), "127.65.0.9:"+strconv.Itoa(f.port)); code != http.StatusForbidden {
		t.Fatalf("CONNECT to a fake address never handed out: %d", code)
	}

	// A client stuck in the SOCKS handshake when the session ends.
	idle, err := net.Dial("tcp", l.SOCKS.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	idle.Write([]byte{5, 1, 0})
	if _, err := io.ReadFull(idle, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("a connection in its handshake after Serve returned: %v, want EOF", err)
	}
	for _, ln := range []net.Listener{l.HTTP, l.SOCKS} {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			c.Close()
			t.Errorf("%s still accepts after Serve returned", ln.Addr())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var vias []string
	for _, d := range logged {
		vias = append(vias, d.Via+":"+strconv.FormatBool(d.Allowed))
	}
	// evil.test: Go's resolver asks for A and AAAA, both refused; api.example.test's
	// AAAA query is NODATA, not a decision.
	want := []string{"dns:true", "dns:false", "dns:false", "socks5:true", "connect:true", "http:true", "connect:false"}
	if !slices.Equal(vias, want) {
		t.Errorf("logged %v, want %v", vias, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.logged) != 0 {
		t.Errorf("Policy.Log was called although Serve was given log: %v", f.logged)
	}
	if !strings.Contains(logged[3].Reason, "requested as fake address 127.65.0.1") || logged[3].Host != "api.example.test" {
		t.Errorf("SOCKS decision %+v", logged[3])
	}
}

// TestHTTPProxyClosesConnectionsWithItsListener checks that a kept-alive connection to the HTTP
// proxy ends when its listener is closed under it, not a keep-alive timeout later: Serve closes
// the listeners when its context ends, and the proxy's server may see that before its own
// context watcher runs (CI hung in TestServe waiting for such a connection).
func TestHTTPProxyClosesConnectionsWithItsListener(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.pol.ServeHTTPProxy(context.Background(), ln) }()
	// A refused CONNECT keeps the connection alive for the next request.
	code, _, c, _ := connect(t, ln.Addr().String(), "evil.test:"+strconv.Itoa(f.port))
	if code != http.StatusForbidden {
		t.Fatalf("CONNECT evil.test: %d, want 403", code)
	}
	ln.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("ServeHTTPProxy = nil after its listener failed under a live context")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeHTTPProxy did not return when its listener was closed")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("a kept-alive connection after the proxy returned: %v, want EOF", err)
	}
}

// TestServeStopsOnBrokenListener checks that one failing server stops the others.
func TestServeStopsOnBrokenListener(t *testing.T) {
	f := newFixture(t)
	ok, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), &Listeners{HTTP: ok, SOCKS: brokenListener{ok.Addr()}}, f.pol, nil)
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "SOCKS5") {
			t.Fatalf("Serve = %v, want the SOCKS5 listener's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve kept running with a broken listener")
	}
	if c, err := net.Dial("tcp", ok.Addr().String()); err == nil {
		c.Close()
		t.Error("the HTTP proxy still accepts")
	}
}

type brokenListener struct{ addr net.Addr }

func (b brokenListener) Accept() (net.Conn, error) { return nil, errors.New("broken") }
func (b brokenListener) Close() error              { return nil }
func (b brokenListener) Addr() net.Addr            { return b.addr }

// TestCONNECTPipelined checks that bytes a client sends right behind its CONNECT request
// (buffered by the HTTP parser) reach the upstream first.
func TestCONNECTPipelined(t *testing.T) {
	f := newFixture(t)
	proxy := serve(t, f.pol.ServeHTTPProxy)
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	target := "api.example.test:" + strconv.Itoa(f.port)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nGET /pipelined HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "hello /pipelined" {
		t.Fatalf("pipelined request: %q", b)
	}
}

func TestProxyEnv(t *testing.T) {
	env := ProxyEnv()
	for _, want := range []string{"HTTPS_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128", "ALL_PROXY=socks5h://127.0.0.1:1080", "NO_PROXY="} {
		if !slices.Contains(env, want) {
			t.Errorf("ProxyEnv() lacks %q: %v", want, env)
		}
	}
}

// TestServeCallsEnd: Serve calls the policy's End once, when the session is over.
func TestServeCallsEnd(t *testing.T) {
	ends := 0
	p := &Policy{End: func() { ends++ }}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Serve(ctx, &Listeners{}, p, nil); err != nil || ends != 1 {
		t.Fatalf("Serve = %v, End called %d times, want once", err, ends)
	}
}
