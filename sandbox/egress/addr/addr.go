// Package addr holds the addresses a sandbox reaches egress on and the sockets the sandbox's
// init creates for them (Listeners), without the proxies that serve them (package egress): the
// init (sandbox/nsinit) imports only this, so that a sandbox starting from a host's own
// executable does not wait for the HTTP stack's package initialisation.
package addr

import (
	"errors"
	"io"
	"net"
	"strconv"
)

// The addresses a sandbox reaches egress on, inside its own network namespace (whose only
// interface is lo). The sandbox's init creates listening sockets on them and hands them to
// the host process (sandbox/nsinit, Plan.Egress); the host serves them with egress.Serve.
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
