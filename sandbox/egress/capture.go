package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

const (
	// tlsPort is the captured port whose connections must open with a TLS ClientHello
	// whose server name, if any, matches the name the destination stands for.
	tlsPort = 443
	// maxClientHello bounds the ClientHello the capture reads (a post-quantum key share
	// makes it ~1.5 KiB; 64 KiB is the protocol's practical ceiling).
	maxClientHello = 64 << 10
)

// serveCapture runs the transparent capture on ln until ctx is done (it then closes ln and
// returns nil) or ln fails. A connection's local address is the destination the sandboxed
// client dialed: when it is one of the DNS stub's fake addresses, the connection is decided
// as a connection to the name on the same port (Policy.Check) and, if allowed, spliced to
// the checked address; on sniPort the TLS ClientHello is read first, and a server name that
// differs from the name refuses the connection (the bytes read are replayed upstream). Any
// other destination is closed. Every decision is passed to Log (Via "capture"). The ClientHello
// must arrive within HeadTimeout (a client that sends nothing is taken to speak a protocol where
// the server speaks first); a tunnel idle for IdleTimeout is closed; connections past MaxConns
// are refused (see Policy.limit).
func (p *Policy) serveCapture(ctx context.Context, ln net.Listener, sniPort int) error {
	return p.acceptLoop(ctx, ln, "capture", func(c net.Conn) { p.captureConn(ctx, c, sniPort) })
}

// captureConn decides and serves one captured connection.
func (p *Policy) captureConn(ctx context.Context, c net.Conn, sniPort int) {
	stop := context.AfterFunc(ctx, func() { c.Close() }) // ends the ClientHello wait when ctx is done
	defer stop()
	dst, err := netip.ParseAddrPort(c.LocalAddr().String())
	if err != nil {
		c.Close()
		return
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	d := Decision{Host: dst.Addr().String(), Port: int(dst.Port()), Via: "capture"}
	refuse := func(reason string) {
		d.Reason = reason
		p.log(d)
		c.Close()
	}
	name, ok := p.fake.name(dst.Addr())
	if !ok {
		refuse("destination " + dst.String() + " is not an address the DNS stub handed out")
		return
	}
	d.Host = name
	var pending []byte
	if d.Port == sniPort {
		var names []string
		pending, names, err = readClientHello(c, p.headTimeout())
		if err != nil {
			refuse(fmt.Sprintf("TLS ClientHello to %s (%s): %v", name, dst, err))
			return
		}
		for _, sni := range names {
			if n, err := normalise(sni); err != nil || n != name {
				refuse(fmt.Sprintf("TLS server name %q does not match %s, the name %s stands for", sni, name, dst.Addr()))
				return
			}
		}
	}
	d = p.check(ctx, name, d.Port)
	d.Via = "capture"
	d.Reason += " (captured connection to " + dst.String() + ")"
	p.log(d)
	if !d.Allowed {
		c.Close()
		return
	}
	up, err := p.dial(ctx, d)
	if err != nil {
		c.Close()
		return
	}
	splice(ctx, c, pending, up, p.idleTimeout())
}

// readClientHello reads from c what it takes to see the first TLS handshake message, and
// returns every byte read (they must be replayed upstream) and the host names of its
// server_name extension (none when it has none). A connection that does not open with a
// handshake record is not TLS: what was read is returned, with no names and no error; so is
// a client that sends nothing within timeout (a protocol where the server speaks first).
// A handshake that is malformed, not a ClientHello, too large or cut short is an error.
func readClientHello(c net.Conn, timeout time.Duration) (read []byte, names []string, err error) {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, nil, err
	}
	defer c.SetReadDeadline(time.Time{})
	var tmp [4096]byte
	fill := func(n int) error {
		for len(read) < n {
			m, err := c.Read(tmp[:])
			read = append(read, tmp[:m]...)
			if err != nil && len(read) < n {
				return err
			}
		}
		return nil
	}
	if err := fill(1); err != nil {
		var ne net.Error
		if len(read) == 0 && (errors.Is(err, io.EOF) || errors.As(err, &ne) && ne.Timeout()) {
			return read, nil, nil
		}
		return read, nil, err
	}
	if read[0] != 0x16 { // not a TLS handshake record
		return read, nil, nil
	}
	var hs []byte // the handshake layer, reassembled from the records
	for off := 0; ; {
		if off > 2*maxClientHello {
			return read, nil, errors.New("ClientHello spread over too many records")
		}
		if err := fill(off + 5); err != nil {
			return read, nil, fmt.Errorf("record header: %w", err)
		}
		hdr := read[off : off+5]
		n := int(hdr[3])<<8 | int(hdr[4])
		switch {
		case hdr[0] != 0x16:
			return read, nil, fmt.Errorf("record type %d inside the ClientHello", hdr[0])
		case hdr[1] != 3:
			return read, nil, fmt.Errorf("record version %d.%d is not TLS", hdr[1], hdr[2])
		case n == 0 || n > 1<<14:
			return read, nil, fmt.Errorf("record length %d", n)
		}
		if err := fill(off + 5 + n); err != nil {
			return read, nil, fmt.Errorf("record: %w", err)
		}
		hs = append(hs, read[off+5:off+5+n]...)
		off += 5 + n
		if len(hs) < 4 {
			continue
		}
		if hs[0] != 1 {
			return read, nil, fmt.Errorf("handshake message type %d is not a ClientHello", hs[0])
		}
		size := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
		if size > maxClientHello {
			return read, nil, fmt.Errorf("ClientHello of %d bytes", size)
		}
		if len(hs) >= 4+size {
			names, err := serverNames(hs[4 : 4+size])
			return read, names, err
		}
	}
}

// cursor reads big-endian fields and length-prefixed vectors; any overrun sets bad.
type cursor struct {
	b   []byte
	bad bool
}

func (c *cursor) take(n int) []byte {
	if c.bad || n > len(c.b) {
		c.bad = true
		return nil
	}
	out := c.b[:n]
	c.b = c.b[n:]
	return out
}

func (c *cursor) uint(size int) int {
	v := 0
	for _, b := range c.take(size) {
		v = v<<8 | int(b)
	}
	return v
}

// vec reads a vector with a size-byte length prefix.
func (c *cursor) vec(size int) cursor {
	b := c.take(c.uint(size))
	return cursor{b: b, bad: c.bad}
}

// serverNames returns the host names of the server_name extension (RFC 6066) of the
// ClientHello body b.
func serverNames(b []byte) ([]string, error) {
	malformed := errors.New("malformed ClientHello")
	c := cursor{b: b}
	c.take(2 + 32) // legacy_version, random
	c.vec(1)       // legacy_session_id
	c.vec(2)       // cipher_suites
	c.vec(1)       // legacy_compression_methods
	if c.bad {
		return nil, malformed
	}
	if len(c.b) == 0 {
		return nil, nil // no extensions
	}
	exts := c.vec(2)
	if c.bad || len(c.b) != 0 {
		return nil, malformed
	}
	var names []string
	for len(exts.b) > 0 {
		typ := exts.uint(2)
		data := exts.vec(2)
		if exts.bad {
			return nil, malformed
		}
		if typ != 0 { // server_name
			continue
		}
		list := data.vec(2)
		for !list.bad && len(list.b) > 0 {
			kind := list.uint(1)
			name := list.vec(2)
			if kind == 0 && !name.bad { // host_name
				names = append(names, string(name.b))
			}
			list.bad = list.bad || name.bad
		}
		if data.bad || list.bad || len(data.b) != 0 {
			return nil, malformed
		}
	}
	return names, nil
}
