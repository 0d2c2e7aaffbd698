// Package egress is the daemon side of a sandbox's hostname egress allowlist
// (research/sandbox.md §4.2): a policy engine (Policy.Check) and the servers a sandboxed CLI
// reaches the network through: an HTTP proxy (CONNECT and absolute-form requests), a SOCKS5
// server (hostname requests only), a fake-IP DNS stub and a transparent capture of the ports
// in CapturePorts. Serve runs all of them on the Listeners one sandbox's init created inside
// its network namespace (see sandbox/nsinit, Plan.Egress).
//
// Every connection is decided once: the name is normalised, matched against the allowlist,
// resolved once, and the resolved addresses are screened. The proxy then dials the address
// that was checked, never the name, so a second (rebound) DNS answer cannot redirect it.
//
// Out of scope: TLS inside a CONNECT or SOCKS tunnel is not inspected, so SNI/Host fronting
// through an allowed CDN name is possible there (§4.3); the transparent capture compares the
// ClientHello's SNI with the name, but cannot see the Host header inside TLS either.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Policy is one invocation's egress policy. Its zero value refuses every host; it must not be
// modified while a proxy is serving with it.
type Policy struct {
	// Allow holds normalised egress entries: exact hostnames ("api.github.com") and
	// "*.suffix" globs, which cover names below the suffix but not the suffix itself
	// (see covers).
	Allow []string
	// Ports are the allowed destination ports; empty means 80 and 443.
	Ports []int
	// AdmitNets are address ranges that allowed names may resolve to although they are
	// loopback, private, etc. It is an operator setting; it never admits an IP literal.
	AdmitNets []netip.Prefix
	// Resolver resolves a normalised hostname; nil means net.DefaultResolver.LookupNetIP.
	Resolver func(ctx context.Context, host string) ([]netip.Addr, error)
	// Log, when set, receives every decision the proxies make, allowed or not. It may be
	// called from several goroutines at once.
	Log func(Decision)
	// End, when set, is called once when a Serve session with this policy ends, after its last
	// call of Log (a caller that aggregates decisions writes its summary then).
	End func()
	// Dial, when set, opens upstream connections in place of a net.Dialer with a 10 s
	// timeout. It is given the address Check returned (and the checked port), and must
	// connect to exactly that address: a test redirecting to a local server, or a host that
	// must dial from a particular source address or with a socket mark.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// MaxConns caps the connections a Serve session holds at once, across the HTTP proxy, the
	// SOCKS5 server and the transparent capture (the DNS stub is UDP and holds none): a
	// connection accepted past it is closed at once, unread, and logged as refused ("connection
	// limit N reached"). Below 1 means DefaultMaxConns. Each connection costs the serving process
	// a descriptor (a tunnel, two) and a goroutine until it closes.
	MaxConns int

	// fake maps the fake addresses of a Serve session's DNS stub back to their names; nil
	// outside Serve.
	fake *fakeIPs
	// track counts a Serve session's connections in progress, so that Serve returns only
	// once none is left (and Log is no longer called); nil outside Serve.
	track *sync.WaitGroup
	// conns is a Serve session's connection count, shared by its listeners; nil outside Serve.
	conns *connLimit
	// head and idle replace HeadTimeout and IdleTimeout when set (tests).
	head, idle time.Duration
}

// begin records the start of a connection's handling in a Serve session.
func (p *Policy) begin() {
	if p.track != nil {
		p.track.Add(1)
	}
}

// end records the end of a connection's handling in a Serve session.
func (p *Policy) end() {
	if p.track != nil {
		p.track.Done()
	}
}

// Decision is the outcome of one egress check.
type Decision struct {
	Host    string     // normalised host, or the raw request target when it could not be normalised
	Port    int        // destination port
	Addr    netip.Addr // the address to dial when Allowed
	Allowed bool
	Reason  string // why it was refused, or how it was allowed
	// Via is the server that decided: "connect", "http" (absolute-form), "socks5",
	// "dns" (a query to the DNS stub: Port is 0, Addr the fake address handed out) or
	// "capture" (a transparently captured connection); empty for a direct Check. A connection
	// refused when it was accepted (MaxConns) names its server ("http" for the HTTP proxy,
	// "socks5", "capture"), with the address it was made to as Host and Port.
	Via string
	// LookupErr is set when an allowed name could not be resolved (no such host, no answer,
	// a lookup that timed out): the refusal is the network's, not the policy's, and the
	// proxies answer it as a gateway error (502, or 504 for a timeout), not as a 403.
	LookupErr error
	// refusedAddrs says the name resolved only to refused addresses, which Reason lists (for
	// the audit log) and the client is not told (see answer).
	refusedAddrs bool
}

// errNoAddresses is the lookup failure of a name that resolved to no address at all.
var errNoAddresses = errors.New("no addresses")

const (
	lookupTimeout = 10 * time.Second
	dialTimeout   = 10 * time.Second
)

// Check decides whether host:port may be reached. host is normalised (lowercase, no trailing
// dot; non-ASCII names are refused, see normalise); IP literals are always refused; anything else that is not a plain hostname (userinfo, '#', '%', spaces, ports) is refused.
// An allowed name is resolved once, and the first resolved address that is ordinary global
// unicast (no row of the IANA special-purpose registries, no cloud metadata address, nor
// anything embedding one: see blockedReason), or that AdmitNets admits (see admittedWhole), is
// returned: the caller must dial exactly that address.
// Check does not call Log; the proxies log what it returns.
func (p *Policy) Check(ctx context.Context, host string, port int) (netip.Addr, Decision) {
	d := p.check(ctx, host, port)
	return d.Addr, d
}

func (p *Policy) check(ctx context.Context, raw string, port int) Decision {
	d := Decision{Host: raw, Port: port}
	refuse := func(format string, a ...any) Decision {
		d.Reason = fmt.Sprintf(format, a...)
		return d
	}
	if lit, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(raw, "["), "]")); err == nil {
		lit = lit.Unmap()
		d.Host = lit.String()
		// A bundle's egress names hosts only, so no address is ever allowed as such, not even
		// one in an admitted network (AdmitNets widens what allowed names may resolve to).
		return refuse("IP literal %s: egress takes hostnames", lit)
	}
	host, err := normalise(raw)
	if err != nil {
		return refuse("%v", err)
	}
	d.Host = host
	entry, ok := p.match(host)
	if !ok {
		return refuse("host %s is not in the egress allowlist", host)
	}
	if !p.portAllowed(port) {
		return refuse("port %d is not allowed", port)
	}
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := p.resolve(lctx, host)
	if err == nil && len(addrs) == 0 {
		err = errNoAddresses
	}
	if err != nil {
		d.LookupErr = err
		return refuse("lookup %s: %v", host, err)
	}
	var blocked []string
	for _, a := range addrs {
		a = a.Unmap()
		if p.admittedWhole(a) {
			d.Addr, d.Allowed, d.Reason = a, true, "allowed by "+entry+" (address in an admitted network)"
			return d
		}
		if why := blockedReason(a); why != "" {
			blocked = append(blocked, a.String()+" ("+why+")")
			continue
		}
		d.Addr, d.Allowed, d.Reason = a, true, "allowed by "+entry
		return d
	}
	d.refusedAddrs = true
	return refuse("%s resolves only to refused addresses: %s", host, strings.Join(blocked, "; "))
}

// answer is the reason a refused decision gives the sandboxed client: Reason, except that what
// only the host's resolver knows — its own address (Go's DNS errors name the server), the
// addresses an allowed name resolved to — stays in Reason, which the audit log gets. The client
// learns the host and port it asked for and what went wrong.
func (d Decision) answer() string {
	switch {
	case d.LookupErr != nil:
		return "lookup " + d.Host + ": " + lookupFailure(d.LookupErr)
	case d.refusedAddrs:
		return d.Host + " resolves only to refused addresses (private, loopback, link-local, metadata or other special-purpose ranges; the audit log names them)"
	}
	return d.Reason
}

// lookupFailure says why a lookup failed without naming the server that answered.
func lookupFailure(err error) string {
	var de *net.DNSError
	switch {
	case errors.Is(err, errNoAddresses):
		return "no addresses"
	case errors.As(err, &de) && de.IsNotFound:
		return "no such host"
	case isTimeout(err):
		return "timed out"
	case errors.As(err, &de) && de.Err != "":
		return de.Err
	}
	return "the lookup failed"
}

// gatewayText is what the client is told when the connection to an allowed host:port failed
// (err is the dial's, or the forwarded request's, error): the failure without the address that
// was dialed (a client behind the DNS stub knows only a fake one).
func gatewayText(host string, port int, err error) string {
	var se *os.SyscallError
	var errno syscall.Errno
	why := "the connection failed"
	switch {
	case isTimeout(err):
		why = "timed out (deadline exceeded)"
	case errors.As(err, &se):
		why = se.Err.Error()
	case errors.As(err, &errno):
		why = errno.Error()
	}
	return "egress proxy: connect to " + net.JoinHostPort(host, strconv.Itoa(port)) + ": " + why
}

// isTimeout says err is a deadline that passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// normalise returns the canonical form of hostname h (lowercase, no trailing dot), or an
// error when h is not a plain ASCII hostname. Unicode names are refused rather than mapped:
// golang.org/x/net/idna needs golang.org/x/text, which this module does not require, and
// every client library sends the xn-- form anyway.
func normalise(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("empty host")
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c >= 0x80 {
			return "", fmt.Errorf("host %q is not ASCII: send its IDNA (xn--) form", h)
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return "", fmt.Errorf("host %q is not a hostname: character %q", h, c)
		}
	}
	a := strings.TrimSuffix(strings.ToLower(h), ".")
	if len(a) > 253 {
		return "", fmt.Errorf("host %q is longer than 253 characters", h)
	}
	labels := strings.Split(a, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return "", fmt.Errorf("host %q: label %q is not a valid hostname label", h, l)
		}
	}
	// A numeric last label makes the name an IPv4 address to many parsers ("127.1",
	// "0x7f.1", "2130706433").
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
		return "", fmt.Errorf("host %q looks like a numeric IPv4 address", h)
	}
	return a, nil
}

// match returns the Allow entry covering host.
func (p *Policy) match(host string) (string, bool) {
	for _, e := range p.Allow {
		if covers(e, host) {
			return e, true
		}
	}
	return "", false
}

func (p *Policy) portAllowed(port int) bool {
	if len(p.Ports) == 0 {
		return port == 80 || port == 443
	}
	return slices.Contains(p.Ports, port)
}

func (p *Policy) admitted(a netip.Addr) bool {
	for _, n := range p.AdmitNets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

func (p *Policy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if p.Resolver != nil {
		return p.Resolver(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// decide checks host:port for the proxy via, logs the decision and returns it. Inside a
// Serve session, a request for one of the DNS stub's fake addresses is decided as a request
// for the name the address stands for (clients that resolve names themselves, e.g. socks5://).
func (p *Policy) decide(ctx context.Context, via, host string, port int) Decision {
	fakeAddr := ""
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil && p.fake != nil {
		if name, ok := p.fake.name(a.Unmap()); ok {
			fakeAddr, host = a.Unmap().String(), name
		}
	}
	d := p.check(ctx, host, port)
	d.Via = via
	if fakeAddr != "" {
		d.Reason += " (requested as fake address " + fakeAddr + ")"
	}
	p.log(d)
	return d
}

// log passes d to Log, when set.
func (p *Policy) log(d Decision) {
	if p.Log != nil {
		p.Log(d)
	}
}

// dial connects to the address an allowed decision checked.
func (p *Policy) dial(ctx context.Context, d Decision) (net.Conn, error) {
	addr := netip.AddrPortFrom(d.Addr, uint16(d.Port))
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if p.Dial != nil {
		return p.Dial(dctx, addr)
	}
	var dl net.Dialer
	return dl.DialContext(dctx, "tcp", addr.String())
}

// gatewayStatus is the HTTP status the proxy answers when an allowed destination could not be
// reached (err is the lookup's or the dial's error): 504 Gateway Timeout when it timed out,
// else 502 Bad Gateway. A policy refusal is a 403 (see refusalStatus).
func gatewayStatus(err error) int {
	if isTimeout(err) {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// refusalStatus is the HTTP status of a refused decision: 403 Forbidden when the policy
// refused it, the gateway status of its lookup failure when the name is allowed but did not
// resolve.
func refusalStatus(d Decision) int {
	if d.LookupErr != nil {
		return gatewayStatus(d.LookupErr)
	}
	return http.StatusForbidden
}

// splice copies between a and b until both directions end, ctx is done, or (idle > 0) no byte
// has moved through a in either direction for idle (see watchIdle), then closes both.
// pending holds bytes of a's stream already read (a bufio.Reader's buffer after the handshake);
// they are written to b first, and a itself is read from then on, so that both directions
// copy *net.TCPConn to *net.TCPConn and io.Copy takes the kernel's splice(2) path (a and b are
// closed as given, but copied as rawConn returns them).
func splice(ctx context.Context, a net.Conn, pending []byte, b net.Conn, idle time.Duration) {
	closeBoth := func() { a.Close(); b.Close() }
	stop := context.AfterFunc(ctx, closeBoth)
	defer stop()
	ra, rb := rawConn(a), rawConn(b)
	if idle > 0 {
		stopIdle := watchIdle(ra, idle, closeBoth)
		defer stopIdle()
	}
	var wg sync.WaitGroup
	half := func(dst, src net.Conn, pending []byte) {
		defer wg.Done()
		var err error
		if len(pending) > 0 {
			_, err = dst.Write(pending)
		}
		if err == nil {
			_, _ = io.Copy(dst, src)
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go half(rb, ra, pending)
	go half(ra, rb, nil)
	wg.Wait()
	closeBoth()
}

// parsePort parses a destination port in 1..65535.
func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || strings.Trim(s, "0123456789") != "" || n < 1 || n > 65535 {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return n, nil
}

// covers reports whether the egress entry e (a normalised hostname, or "*.suffix" for every name
// under suffix but not suffix itself) allows the normalised hostname host. It is the runtime half of
// manifest.HostCovers, kept here so that the sandbox's packages stay free of the manifest model.
func covers(e, host string) bool {
	if suffix, ok := strings.CutPrefix(e, "*"); ok {
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return e == host
}
