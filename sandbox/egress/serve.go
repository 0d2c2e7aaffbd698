package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
)

// The addresses a sandbox reaches egress on, inside its own network namespace (whose only
// interface is lo). The sandbox's init creates listening sockets on them and hands them to
// the host process (sandbox/nsinit, Plan.Egress); the host serves them with Serve.
const (
	// HTTPProxyPort is the HTTP proxy (CONNECT and absolute-form http://), on 127.0.0.1.
	HTTPProxyPort = 3128
	// SOCKSPort is the SOCKS5 server (CONNECT, hostname requests), on 127.0.0.1.
	SOCKSPort = 1080
	// DNSPort is the fake-IP DNS stub (UDP), on 127.0.0.1; the sandbox's /etc/resolv.conf
	// names it.
	DNSPort = 53
)

// ProxyHost is the address the proxies listen on inside the sandbox.
const ProxyHost = "127.0.0.1"

// CapturePorts returns the TCP ports captured transparently on 0.0.0.0 inside the sandbox
// (HTTP, HTTPS, SSH): a connection to one of the DNS stub's fake addresses on such a port
// reaches the name the address stands for, if the policy allows it.
func CapturePorts() []int { return []int{80, 443, 22} }

// FakeNet is the range the DNS stub hands fake addresses out of, one per name and session.
// It lies in 127.0.0.0/8, which the sandbox's lo answers for as a whole.
var FakeNet = netip.MustParsePrefix("127.65.0.0/16")

// ProxyEnv returns the environment variables that point proxy-aware programs at the
// sandbox's proxies: HTTP_PROXY, HTTPS_PROXY (and their lowercase forms, which curl wants
// for http://) at the HTTP proxy, ALL_PROXY at the SOCKS5 server with remote resolution
// (socks5h), an empty NO_PROXY, and NODE_USE_ENV_PROXY=1 (Node 22.21+/24.5+ honours the
// variables only with it). Programs that ignore them still reach allowed names on the
// captured ports through the DNS stub.
func ProxyEnv() []string {
	httpProxy := "http://" + net.JoinHostPort(ProxyHost, strconv.Itoa(HTTPProxyPort))
	socks := "socks5h://" + net.JoinHostPort(ProxyHost, strconv.Itoa(SOCKSPort))
	return []string{
		"HTTP_PROXY=" + httpProxy, "http_proxy=" + httpProxy,
		"HTTPS_PROXY=" + httpProxy, "https_proxy=" + httpProxy,
		"ALL_PROXY=" + socks, "all_proxy=" + socks,
		"NO_PROXY=", "no_proxy=",
		"NODE_USE_ENV_PROXY=1",
	}
}

// Listeners are the sockets one sandbox reaches egress through, created inside its network
// namespace (see sandbox/nsinit, Cmd.Listeners). A nil field is not served.
type Listeners struct {
	HTTP        net.Listener   // 127.0.0.1:HTTPProxyPort
	SOCKS       net.Listener   // 127.0.0.1:SOCKSPort
	DNS         net.PacketConn // UDP 127.0.0.1:DNSPort
	Transparent []net.Listener // 0.0.0.0:p for each p of CapturePorts, in that order
}

// Close closes every listener and returns the first error.
func (l *Listeners) Close() error {
	var errs []error
	for _, ln := range l.all() {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// all returns the non-nil sockets of l.
func (l *Listeners) all() []io.Closer {
	var out []io.Closer
	for _, ln := range append([]net.Listener{l.HTTP, l.SOCKS}, l.Transparent...) {
		if ln != nil {
			out = append(out, ln)
		}
	}
	if l.DNS != nil {
		out = append(out, l.DNS)
	}
	return out
}

// Serve serves one sandbox's egress on l with policy p until ctx is done, then closes every
// listener and connection and returns nil once nothing is left running (log is not called
// after Serve returns; p.End is called last): the HTTP proxy (ServeHTTPProxy) on l.HTTP, the SOCKS5 server
// (ServeSOCKS5) on l.SOCKS, the fake-IP DNS stub on l.DNS and the transparent capture on
// l.Transparent. If one of them fails (its listener breaks), Serve stops all of them and
// returns that error: the sandbox then has no egress at all, never an unchecked one.
//
// The servers share one connection cap, p.MaxConns: past it, a new connection to any of them is
// closed as soon as it is accepted and logged as refused; closing a connection frees its slot.
//
// The DNS stub and the capture share one table of fake addresses, private to this call: a
// query for an allowed name gets an address from FakeNet, and a captured connection to it
// is checked and forwarded as a connection to the name (see the package documentation and
// serveDNS, serveCapture). The proxies also accept those addresses in place of the name.
//
// log, when non-nil, receives every decision in place of p.Log (the caller adds its own
// attribution, e.g. the call id, in the closure). p is not modified.
func Serve(ctx context.Context, l *Listeners, p *Policy, log func(Decision)) error {
	pol := *p
	if log != nil {
		pol.Log = log
	}
	pol.fake = newFakeIPs(FakeNet)
	pol.track = new(sync.WaitGroup)
	pol.conns = &connLimit{max: int64(pol.maxConns())}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	run := func(what string, serve func() error) {
		wg.Go(func() {
			if err := serve(); err != nil && ctx.Err() == nil {
				once.Do(func() { first = fmt.Errorf("egress: %s: %w", what, err) })
				cancel()
			}
		})
	}
	if l.HTTP != nil {
		run("HTTP proxy", func() error { return pol.ServeHTTPProxy(ctx, l.HTTP) })
	}
	if l.SOCKS != nil {
		run("SOCKS5", func() error { return pol.ServeSOCKS5(ctx, l.SOCKS) })
	}
	if l.DNS != nil {
		run("DNS stub", func() error { return pol.serveDNS(ctx, l.DNS) })
	}
	for _, ln := range l.Transparent {
		if ln != nil {
			run("capture on "+ln.Addr().String(), func() error { return pol.serveCapture(ctx, ln, tlsPort) })
		}
	}
	<-ctx.Done()
	l.Close() // unblocks every accept and read
	wg.Wait()
	// No server accepts any more, so no connection is added from here on; every one in
	// progress ends on ctx (its sockets are closed, its lookups and dials cancelled).
	pol.track.Wait()
	if pol.End != nil {
		pol.End()
	}
	return first
}

// acceptLoop accepts connections on ln until ctx is done (it then closes ln and returns nil)
// or ln fails, and handles each in its own goroutine, tracked by p (see Policy.begin). The
// connection cap holds (see Policy.limit; via names the server). A shortage (EMFILE, say) is
// waited out with a growing pause, not returned. Every handler must return soon after ctx is
// done.
func (p *Policy) acceptLoop(ctx context.Context, ln net.Listener, via string, handle func(net.Conn)) error {
	ln = p.limit(ln, via) // before the AfterFunc: its goroutine reads ln
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var pause backoff
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isShortage(err) {
				pause.wait() // e.g. EMFILE: let connections finish
				continue
			}
			return err
		}
		pause.reset()
		p.begin()
		go func() {
			defer p.end()
			defer c.Close() // frees the connection's slot whatever the handler did
			handle(c)
		}()
	}
}
