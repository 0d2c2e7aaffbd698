package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/clihost/clihost/sandbox/egress/addr"
)

// The addresses a sandbox reaches egress on, inside its own network namespace (package addr
// defines them, for the sandbox's init).
const (
	HTTPProxyPort = addr.HTTPProxyPort // the HTTP proxy (CONNECT and absolute-form http://), on 127.0.0.1
	SOCKSPort     = addr.SOCKSPort     // the SOCKS5 server (CONNECT, hostname requests), on 127.0.0.1
	DNSPort       = addr.DNSPort       // the fake-IP DNS stub (UDP), on 127.0.0.1
	ProxyHost     = addr.ProxyHost     // the address the proxies listen on inside the sandbox
)

// CapturePorts returns the TCP ports captured transparently on 0.0.0.0 inside the sandbox
// (addr.CapturePorts).
func CapturePorts() []int { return addr.CapturePorts() }

// FakeNet is the range the DNS stub hands fake addresses out of, one per name and session.
// It lies in 127.0.0.0/8, which the sandbox's lo answers for as a whole.
var FakeNet = netip.MustParsePrefix("127.65.0.0/16")

// ProxyEnv returns the environment variables that point proxy-aware programs at the sandbox's
// proxies (addr.ProxyEnv).
func ProxyEnv() []string { return addr.ProxyEnv() }

// Listeners are the sockets one sandbox reaches egress through (addr.Listeners).
type Listeners = addr.Listeners

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
