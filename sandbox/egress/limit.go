package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The bounds of one Serve session's connections (issue 10: one call's connections to the proxies
// exhausted the host process's descriptors). A connection costs the host a descriptor and a
// goroutine while it is open, and a tunnel a second descriptor upstream.
const (
	// DefaultMaxConns is Policy.MaxConns's default: the connections one call's egress servers
	// hold at once, all listeners together.
	DefaultMaxConns = 128
	// HeadTimeout bounds the wait for a connection's head: an HTTP request line and headers, a
	// SOCKS5 greeting and request, a captured TLS connection's ClientHello.
	HeadTimeout = 10 * time.Second
	// IdleTimeout closes an established tunnel (CONNECT, SOCKS5, capture) through which no byte
	// has moved in either direction for this long; it also bounds the wait for an upstream's
	// response headers to an absolute-form request.
	IdleTimeout = 5 * time.Minute
	// keepAliveTimeout closes an HTTP proxy connection idle between two requests.
	keepAliveTimeout = time.Minute
	// idleChecks is how many times per IdleTimeout a tunnel's byte counters are read.
	idleChecks = 5
)

// connLimit counts the connections one session holds, across its listeners.
type connLimit struct {
	max int64
	n   atomic.Int64
}

// acquire takes a slot; false when all are taken.
func (l *connLimit) acquire() bool {
	if l.n.Add(1) > l.max {
		l.n.Add(-1)
		return false
	}
	return true
}

func (l *connLimit) release() { l.n.Add(-1) }

// maxConns is the session's connection cap.
func (p *Policy) maxConns() int {
	if p.MaxConns < 1 {
		return DefaultMaxConns
	}
	return p.MaxConns
}

// headTimeout is the session's HeadTimeout (shorter in tests).
func (p *Policy) headTimeout() time.Duration {
	if p.head > 0 {
		return p.head
	}
	return HeadTimeout
}

// idleTimeout is the session's IdleTimeout (shorter in tests).
func (p *Policy) idleTimeout() time.Duration {
	if p.idle > 0 {
		return p.idle
	}
	return IdleTimeout
}

// limitListener is a listener whose Accept enforces a session's connection cap: past it, a
// connection is closed as soon as it is accepted, unread, and the refusal is logged.
type limitListener struct {
	net.Listener
	p   *Policy
	lim *connLimit
	via string // the server, for the refusal's Decision.Via
}

// limit wraps ln with the session's connection cap (Serve shares one between all its listeners;
// a server started on its own has its own).
func (p *Policy) limit(ln net.Listener, via string) net.Listener {
	lim := p.conns
	if lim == nil {
		lim = &connLimit{max: int64(p.maxConns())}
	}
	return &limitListener{Listener: ln, p: p, lim: lim, via: via}
}

// Accept returns the next connection that gets a slot; the slot is freed when it is closed.
// Errors are the listener's, unchanged (callers back off on shortages).
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.lim.acquire() {
			return &limitedConn{Conn: c, release: l.lim.release}, nil
		}
		d := l.p.localDecision(c, l.via)
		d.Reason = fmt.Sprintf("connection limit %d reached", l.lim.max)
		l.p.log(d)
		c.Close()
	}
}

// localDecision is a refusal of c before anything was read from it: Host and Port are the
// address the client connected to (for a captured connection to a fake address, the name it
// stands for).
func (p *Policy) localDecision(c net.Conn, via string) Decision {
	d := Decision{Via: via}
	if ap, err := netip.ParseAddrPort(c.LocalAddr().String()); err == nil {
		d.Host, d.Port = ap.Addr().Unmap().String(), int(ap.Port())
		if name, ok := p.fake.name(ap.Addr().Unmap()); ok && via == "capture" {
			d.Host = name
		}
	}
	return d
}

// limitedConn holds a slot of a connLimit until it is first closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close closes the connection and frees its slot.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// rawConn returns the connection c wraps (the *net.TCPConn a listener returned), for copying
// with splice(2) and for its socket options; closing must go through c.
func rawConn(c net.Conn) net.Conn {
	if lc, ok := c.(*limitedConn); ok {
		return lc.Conn
	}
	return c
}

// backoff is an accept loop's wait after a temporary error: 5 ms, doubled each time up to 1 s
// (as net/http's), reset by a successful accept.
type backoff struct{ d time.Duration }

func (b *backoff) wait() {
	if b.d == 0 {
		b.d = 5 * time.Millisecond
	} else {
		b.d = min(2*b.d, time.Second)
	}
	time.Sleep(b.d)
}

func (b *backoff) reset() { b.d = 0 }

// isShortage reports whether an accept or read error is a shortage that passes (descriptors,
// buffers, memory) or a connection that went away before it was accepted, rather than a broken
// socket.
func isShortage(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// watchIdle calls onIdle once when no byte has moved over the TCP connection c, in either
// direction, for idle (measured from c's kernel counters: bytes received, and bytes sent and
// acknowledged; it costs a timer and one getsockopt every idle/5, and leaves splice(2) alone).
// It is closed between idle and 1.2 × idle after the last byte. stop ends the watch; a
// connection whose counters cannot be read (not TCP) is not watched.
func watchIdle(c net.Conn, idle time.Duration, onIdle func()) (stop func()) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return func() {}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	counters := func() (uint64, bool) {
		var info *unix.TCPInfo
		var gerr error
		if err := rc.Control(func(fd uintptr) {
			info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.SOL_TCP, unix.TCP_INFO)
		}); err != nil || gerr != nil {
			return 0, false
		}
		// Both counters only grow (Linux ≥ 4.1; egress needs Landlock ABI 4, Linux ≥ 6.7).
		return info.Bytes_received + info.Bytes_acked, true
	}
	last, ok := counters()
	if !ok {
		return func() {}
	}
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	since := time.Now()
	tick := idle / idleChecks
	var check func()
	check = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		now, ok := counters()
		switch {
		case !ok: // the socket is closed
			return
		case now != last:
			last, since = now, time.Now()
		case time.Since(since) >= idle:
			stopped = true
			go onIdle()
			return
		}
		t = time.AfterFunc(tick, check)
	}
	mu.Lock()
	t = time.AfterFunc(tick, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}
