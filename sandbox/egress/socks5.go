package egress

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"time"
)

// SOCKS5 constants (RFC 1928).
const (
	socksVersion     = 5
	socksNoAuth      = 0x00
	socksNoMethod    = 0xff
	socksCmdConnect  = 0x01
	socksATYPv4      = 0x01
	socksATYPDomain  = 0x03
	socksATYPv6      = 0x04
	socksOK          = 0x00
	socksNotAllowed  = 0x02
	socksHostUnreach = 0x04
	socksCmdUnsupp   = 0x07
	socksATYPUnsupp  = 0x08
)

// ServeSOCKS5 runs a SOCKS5 server on ln until ctx is done (it then returns nil) or ln
// fails. It offers no authentication and only the CONNECT command. Requests should name the
// destination by hostname (ATYP 3, as socks5h:// clients do); IPv4/IPv6 requests go through
// the same Check, which refuses IP literals outside AdmitNets. A refusal is reply 0x02
// (connection not allowed by ruleset); a failed dial is 0x04. Every decision is passed to Log.
// The greeting and request must arrive within HeadTimeout; a tunnel idle for IdleTimeout is
// closed; connections past MaxConns are refused (see Policy.limit).
func (p *Policy) ServeSOCKS5(ctx context.Context, ln net.Listener) error {
	return p.acceptLoop(ctx, ln, "socks5", func(c net.Conn) { p.serveSOCKSConn(ctx, c) })
}

func (p *Policy) serveSOCKSConn(ctx context.Context, c net.Conn) {
	stop := context.AfterFunc(ctx, func() { c.Close() }) // ends the handshake when ctx is done
	defer stop()
	_ = c.SetDeadline(time.Now().Add(p.headTimeout()))
	br := bufio.NewReader(c)
	host, port, code := socksRequest(br, c)
	_ = c.SetDeadline(time.Time{}) // the lookup and the dial have their own bounds
	if code != socksOK {
		if code != socksNoMethod {
			socksReply(c, code)
		}
		c.Close()
		return
	}
	d := p.decide(ctx, "socks5", host, port)
	if !d.Allowed {
		code := byte(socksNotAllowed)
		if d.LookupErr != nil { // the name is allowed; the network could not find it
			code = socksHostUnreach
		}
		socksReply(c, code)
		c.Close()
		return
	}
	up, err := p.dial(ctx, d)
	if err != nil {
		socksReply(c, socksHostUnreach)
		c.Close()
		return
	}
	if socksReply(c, socksOK) != nil {
		c.Close()
		up.Close()
		return
	}
	pending, _ := br.Peek(br.Buffered()) // data the client sent after its request
	splice(ctx, c, pending, up, p.idleTimeout())
}

// socksRequest performs the method negotiation and reads a request. It returns the
// destination, or a reply code other than socksOK; socksNoMethod means the refusal has been
// sent already (or the connection is unusable).
func socksRequest(br *bufio.Reader, w io.Writer) (host string, port int, code byte) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != socksVersion {
		return "", 0, socksNoMethod
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return "", 0, socksNoMethod
	}
	method := byte(socksNoMethod)
	for _, m := range methods {
		if m == socksNoAuth {
			method = socksNoAuth
		}
	}
	if _, err := w.Write([]byte{socksVersion, method}); err != nil || method != socksNoAuth {
		return "", 0, socksNoMethod
	}
	var req [4]byte // VER CMD RSV ATYP
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != socksVersion {
		return "", 0, socksNoMethod
	}
	if req[1] != socksCmdConnect {
		return "", 0, socksCmdUnsupp
	}
	switch req[3] {
	case socksATYPDomain:
		n, err := br.ReadByte()
		if err != nil {
			return "", 0, socksNoMethod
		}
		name := make([]byte, n)
		if _, err := io.ReadFull(br, name); err != nil {
			return "", 0, socksNoMethod
		}
		host = string(name)
	case socksATYPv4, socksATYPv6:
		b := make([]byte, 4)
		if req[3] == socksATYPv6 {
			b = make([]byte, 16)
		}
		if _, err := io.ReadFull(br, b); err != nil {
			return "", 0, socksNoMethod
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.String()
	default:
		return "", 0, socksATYPUnsupp
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return "", 0, socksNoMethod
	}
	return host, int(pb[0])<<8 | int(pb[1]), socksOK
}

// socksReply writes a reply with the given code and an all-zero IPv4 bound address.
func socksReply(w io.Writer, code byte) error {
	_, err := w.Write([]byte{socksVersion, code, 0, socksATYPv4, 0, 0, 0, 0, 0, 0})
	return err
}
