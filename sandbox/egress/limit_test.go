package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// limitSession serves pol with Serve on an HTTP proxy, a SOCKS5 server and one capture listener
// (bound to the fake address of api.example.test, on a free port: the test cannot bind the real
// capture ports), and returns their addresses and the decisions logged.
type limitSession struct {
	http, socks, capture string
	mu                   sync.Mutex
	logged               []Decision
}

func serveLimited(t *testing.T, pol *Policy) *limitSession {
	t.Helper()
	s := &limitSession{}
	listen := func(addr string) net.Listener {
		ln, err := net.Listen("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	// Serve hands out 127.65.0.1 first: the fake address api.example.test gets in the session.
	l := &Listeners{HTTP: listen("127.0.0.1:0"), SOCKS: listen("127.0.0.1:0"),
		Transparent: []net.Listener{listen("127.65.0.1:0")}}
	s.http, s.socks, s.capture = l.HTTP.Addr().String(), l.SOCKS.Addr().String(), l.Transparent[0].Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, l, pol, func(d Decision) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.logged = append(s.logged, d)
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

// refusals returns the decisions logged with reason.
func (s *limitSession) refusals(reason string) []Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Decision
	for _, d := range s.logged {
		if d.Reason == reason {
			out = append(out, d)
		}
	}
	return out
}

// closedUnread reports whether the server closes c without sending a byte (EOF within 5 s).
func closedUnread(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 1))
	return n == 0 && errors.Is(err, io.EOF)
}

// socksGreet opens a connection to a SOCKS5 server and sends the no-auth greeting; served
// reports whether the server answered it (the connection holds a slot).
func socksGreet(t *testing.T, addr string) (c net.Conn, served bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Write([]byte{5, 1, 0})
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var m [2]byte
	_, err = io.ReadFull(c, m[:])
	c.SetReadDeadline(time.Time{})
	return c, err == nil && m == [2]byte{5, 0}
}

// servedWithin retries socksGreet until one is served, for up to 5 s (a closed connection's slot
// is freed once the server has seen the close).
func servedWithin(t *testing.T, addr string) net.Conn {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, ok := socksGreet(t, addr); ok {
			return c
		}
	}
	t.Fatalf("no connection to %s was served within 5 s", addr)
	return nil
}

// TestConnLimit: the cap holds across the session's listeners (a SOCKS5 connection in its
// handshake and an HTTP CONNECT tunnel fill MaxConns 2; the next connection, to the capture or
// either proxy, is closed unread and logged as refused), and a slot is freed when a connection
// closes, whether in its handshake or a tunnel.
func TestConnLimit(t *testing.T) {
	f := newFixture(t)
	f.pol.MaxConns = 2
	s := serveLimited(t, f.pol)

	held, ok := socksGreet(t, s.socks)
	if !ok {
		t.Fatal("the first connection was not served")
	}
	status, body, tunnel, br := connect(t, s.http, "api.example.test:"+strconv.Itoa(f.port))
	if status != 200 {
		t.Fatalf("CONNECT within the cap: %d %s", status, body)
	}
	for _, addr := range []string{s.capture, s.socks, s.http} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if !closedUnread(t, c) {
			t.Errorf("a connection to %s past the cap was not closed at once", addr)
		}
		c.Close()
	}
	const reason = "connection limit 2 reached"
	got := s.refusals(reason)
	want := []string{"capture 127.65.0.1", "socks5 127.0.0.1", "http 127.0.0.1"} // no name was looked up
	if len(got) != len(want) {
		t.Fatalf("refusals logged: %+v, want %d with reason %q", got, len(want), reason)
	}
	for i, d := range got {
		addr := []string{s.capture, s.socks, s.http}[i]
		port := int(netip.MustParseAddrPort(addr).Port())
		if d.Allowed || d.Via+" "+d.Host != want[i] || d.Port != port {
			t.Errorf("refusal %d: %+v, want %s port %d", i, d, want[i], port)
		}
	}
	// The tunnel still works while the cap refuses others.
	if got := getOver(t, tunnel, br, "/held"); got != "hello /held" {
		t.Fatalf("through the held tunnel: %q", got)
	}

	// Closing the connection in its handshake frees its slot; so does ending the tunnel
	// (getOver's Connection: close ended it upstream).
	held.Close()
	tunnel.Close()
	servedWithin(t, s.socks)
	servedWithin(t, s.socks)
	if c, ok := socksGreet(t, s.socks); ok {
		t.Error("a third connection was served with MaxConns 2")
	} else if !closedUnread(t, c) {
		t.Error("the connection past the cap was not closed")
	}
}

// TestConnLimitDefault: MaxConns below 1 means DefaultMaxConns.
func TestConnLimitDefault(t *testing.T) {
	for _, n := range []int{0, -1} {
		if got := (&Policy{MaxConns: n}).maxConns(); got != DefaultMaxConns {
			t.Errorf("MaxConns %d: cap %d, want %d", n, got, DefaultMaxConns)
		}
	}
	if got := (&Policy{MaxConns: 7}).maxConns(); got != 7 {
		t.Errorf("MaxConns 7: cap %d", got)
	}
}

// TestHeadTimeout: a client that does not send its head within the head timeout is closed — on
// the HTTP proxy (nothing sent, half a request line), the SOCKS5 server (half a greeting; a
// greeting and no request) and the TLS capture (half a ClientHello record, refused and logged) —
// and its slot is freed.
func TestHeadTimeout(t *testing.T) {
	f := newFixture(t)
	f.pol.head = 200 * time.Millisecond
	s := serveLimited(t, f.pol)
	cases := []struct {
		name, addr string
		send       []byte
	}{
		{"HTTP proxy", s.http, nil},
		{"HTTP proxy, half a request line", s.http, []byte("CONNECT api.exa")},
		{"SOCKS5, half a greeting", s.socks, []byte{5}},
	}
	for _, tc := range cases {
		c, err := net.Dial("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(tc.send)
		// The server may answer a cut request with an error status before it closes.
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("%s: a silent client was not closed: %v", tc.name, err)
		}
		c.Close()
	}

	// A SOCKS5 client that got its method reply (it holds the only slot) and sends no request.
	f2 := newFixture(t)
	f2.pol.head = 200 * time.Millisecond
	f2.pol.MaxConns = 1
	s2 := serveLimited(t, f2.pol)
	c, ok := socksGreet(t, s2.socks)
	if !ok {
		t.Fatal("the greeting was not answered")
	}
	if !closedUnread(t, c) {
		t.Error("SOCKS5: a client silent after its greeting was not closed")
	}
	servedWithin(t, s2.socks) // its slot is free again

	// The TLS capture, on its own (serveCapture with the listener's port as the TLS port).
	p := sessionPolicy(f)
	p.head = 200 * time.Millisecond
	fake, _ := p.fake.assign("api.example.test")
	ln, err := net.Listen("tcp4", net.JoinHostPort(fake.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	p.Ports = []int{port}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.serveCapture(ctx, ln, port) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveCapture: %v", err)
		}
	}()
	c, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0x16, 3, 1}) // a handshake record header, cut short
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Errorf("capture: a client silent within its ClientHello was not closed: %v", err)
	}
	if d := f.lastLog(t); d.Allowed || d.Via != "capture" || !strings.Contains(d.Reason, "TLS ClientHello to api.example.test") ||
		!strings.Contains(d.Reason, "timeout") {
		t.Errorf("logged %+v", d)
	}
}

// TestIdleTimeout: a tunnel through which nothing moves is closed after the idle timeout, on
// each server; one that keeps moving bytes in one direction only, for several times the idle
// timeout, is not (positive controls, download and upload).
func TestIdleTimeout(t *testing.T) {
	up, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	// The upstream reads one command line: "silent" holds the connection, "download" writes a
	// byte every 20 ms, 40 times, then closes; "upload" counts what it reads until EOF and
	// writes the count.
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				cmd, _ := br.ReadString('\n')
				switch strings.TrimSpace(cmd) {
				case "silent":
					io.Copy(io.Discard, br)
				case "download":
					for range 40 {
						if _, err := c.Write([]byte{'d'}); err != nil {
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				case "upload":
					n, _ := io.Copy(io.Discard, br)
					fmt.Fprintf(c, "%d", n)
				}
			}()
		}
	}()
	f := newFixture(t)
	f.pol.idle = 250 * time.Millisecond // 800 ms of traffic is more than three idle timeouts
	f.pol.Dial = func(ctx context.Context, _ netip.AddrPort) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", up.Addr().String())
	}
	s := serveLimited(t, f.pol)
	target := "api.example.test:" + strconv.Itoa(f.port)
	open := map[string]func() (net.Conn, io.Reader){
		"CONNECT": func() (net.Conn, io.Reader) {
			status, body, c, br := connect(t, s.http, target)
			if status != 200 {
				t.Fatalf("CONNECT: %d %s", status, body)
			}
			return c, br
		},
		"SOCKS5": func() (net.Conn, io.Reader) {
			code, c, br := socks(t, s.socks, "api.example.test", f.port)
			if code != socksOK {
				t.Fatalf("SOCKS5: reply %#x", code)
			}
			return c, br
		},
		"capture": func() (net.Conn, io.Reader) {
			c, err := net.Dial("tcp", net.JoinHostPort("127.65.0.1", strconv.Itoa(f.port)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c, c
		},
	}
	// The capture needs its listener on the fixture's port: serve one more, on its own.
	capSrv := sessionPolicy(f)
	capSrv.idle = f.pol.idle
	capSrv.fake.assign("api.example.test")
	ln, err := net.Listen("tcp4", net.JoinHostPort("127.65.0.1", strconv.Itoa(f.port)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	capDone := make(chan error, 1)
	go func() { capDone <- capSrv.serveCapture(ctx, ln, 0) }()
	defer func() { cancel(); <-capDone }()

	for name, dial := range open {
		c, r := dial()
		fmt.Fprintln(c, "silent")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, r); err != nil {
			t.Errorf("%s: an idle tunnel was not closed: %v", name, err)
		}

		c, r = dial()
		fmt.Fprintln(c, "download")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if b, err := io.ReadAll(r); err != nil || len(b) != 40 {
			t.Errorf("%s: a download cut short: %d bytes, %v", name, len(b), err)
		}

		c, r = dial()
		fmt.Fprintln(c, "upload")
		for range 40 {
			c.Write([]byte{'u'})
			time.Sleep(20 * time.Millisecond)
		}
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if b, err := io.ReadAll(r); err != nil || string(b) != "40" {
			t.Errorf("%s: an upload cut short: upstream read %q, %v", name, b, err)
		}
	}
}
