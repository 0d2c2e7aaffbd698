package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/dns/dnsmessage"
)

// fakeIPs hands out one address of a prefix per name, for one session, and maps it back.
// Addresses are never reused within the session; once the prefix is used up, new names get
// none (the DNS stub answers SERVFAIL).
type fakeIPs struct {
	mu     sync.Mutex
	prefix netip.Prefix
	next   netip.Addr // the next address to hand out; invalid once the prefix is used up
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
}

// newFakeIPs returns an empty table over prefix, whose first address (the network address)
// is never handed out.
func newFakeIPs(prefix netip.Prefix) *fakeIPs {
	prefix = prefix.Masked()
	return &fakeIPs{
		prefix: prefix,
		next:   prefix.Addr().Next(),
		byName: map[string]netip.Addr{},
		byAddr: map[netip.Addr]string{},
	}
}

// assign returns name's address, handing out a new one on first use; false when the prefix
// is used up. name must be normalised.
func (f *fakeIPs) assign(name string) (netip.Addr, bool) {
	if f == nil {
		return netip.Addr{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.byName[name]; ok {
		return a, true
	}
	a := f.next
	if !a.IsValid() || !f.prefix.Contains(a) {
		return netip.Addr{}, false
	}
	f.next = a.Next()
	if !f.prefix.Contains(f.next) || f.next == lastAddr(f.prefix) {
		f.next = netip.Addr{} // keep the broadcast-looking last address out
	}
	f.byName[name], f.byAddr[a] = a, name
	return a, true
}

// name returns the name a was handed out for.
func (f *fakeIPs) name(a netip.Addr) (string, bool) {
	if f == nil {
		return "", false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.byAddr[a]
	return n, ok
}

// lastAddr returns the highest address of the IPv4 prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// maxDNSMessage bounds the queries the stub reads (UDP; EDNS(0) clients advertise at most
// a few KiB, and a query is far smaller).
const maxDNSMessage = 4096

// serveDNS runs the fake-IP DNS stub on pc until ctx is done (it then closes pc and returns
// nil) or pc fails. It never forwards a query anywhere:
//   - A for a name the allowlist covers (Policy.Allow, whatever the port): one address from
//     the session's fake range, TTL 0, the same for every query of the session.
//   - Any other type (AAAA included) for such a name: NOERROR with no records (NODATA), so
//     that clients fall back to the A answer rather than give up on the name.
//   - PTR for a fake address handed out: the name.
//   - Names the allowlist does not cover, malformed names and everything else of class IN:
//     NXDOMAIN. Other classes: REFUSED; opcodes other than QUERY: NOTIMP; messages that are
//     not one question: FORMERR; responses and undecodable headers: dropped.
//
// Every A answer and every refused name is passed to Log (Via "dns").
func (p *Policy) serveDNS(ctx context.Context, pc net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	buf := make([]byte, maxDNSMessage)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isShortage(err) {
				continue
			}
			return err
		}
		resp := p.dnsAnswer(buf[:n])
		if resp == nil {
			continue
		}
		if _, err := pc.WriteTo(resp, from); err != nil && ctx.Err() != nil {
			return nil
		} // a failed send to one client (e.g. its socket closed) is that client's problem
	}
}

// dnsAnswer returns the stub's response to the query msg, or nil when msg gets none.
func (p *Policy) dnsAnswer(msg []byte) []byte {
	var parser dnsmessage.Parser
	h, err := parser.Start(msg)
	if err != nil || h.Response {
		return nil
	}
	resp := dnsmessage.Header{
		ID: h.ID, Response: true, OpCode: h.OpCode,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true,
	}
	if h.OpCode != 0 {
		resp.RCode = dnsmessage.RCodeNotImplemented
		return buildDNS(resp, nil, nil)
	}
	qs, err := parser.AllQuestions()
	if err != nil || len(qs) != 1 {
		resp.RCode = dnsmessage.RCodeFormatError
		return buildDNS(resp, nil, nil)
	}
	q := qs[0]
	if q.Class != dnsmessage.ClassINET {
		resp.RCode = dnsmessage.RCodeRefused
		return buildDNS(resp, &q, nil)
	}
	if q.Type == dnsmessage.TypePTR {
		if name, ok := p.reverseName(q.Name.String()); ok {
			ptr, err := dnsmessage.NewName(name + ".")
			if err == nil {
				return buildDNS(resp, &q, &dnsmessage.PTRResource{PTR: ptr})
			}
		}
		resp.RCode = dnsmessage.RCodeNameError
		return buildDNS(resp, &q, nil)
	}
	d := Decision{Host: q.Name.String(), Via: "dns"}
	host, err := normalise(d.Host)
	if err != nil {
		d.Reason = err.Error() + ": NXDOMAIN"
		p.log(d)
		resp.RCode = dnsmessage.RCodeNameError
		return buildDNS(resp, &q, nil)
	}
	d.Host = host
	entry, ok := p.match(host)
	if !ok {
		d.Reason = "host " + host + " is not in the egress allowlist: NXDOMAIN (" + strings.TrimPrefix(q.Type.String(), "Type") + " query)"
		p.log(d)
		resp.RCode = dnsmessage.RCodeNameError
		return buildDNS(resp, &q, nil)
	}
	if q.Type != dnsmessage.TypeA {
		return buildDNS(resp, &q, nil) // NODATA
	}
	a, ok := p.fake.assign(host)
	if !ok {
		d.Reason = "no fake address left for this sandbox: SERVFAIL"
		p.log(d)
		resp.RCode = dnsmessage.RCodeServerFailure
		return buildDNS(resp, &q, nil)
	}
	d.Addr, d.Allowed, d.Reason = a, true, "allowed by "+entry+": fake address "+a.String()
	p.log(d)
	return buildDNS(resp, &q, &dnsmessage.AResource{A: a.As4()})
}

// reverseName returns the name whose fake address the PTR query name ("d.c.b.a.in-addr.arpa.")
// stands for.
func (p *Policy) reverseName(qname string) (string, bool) {
	rest, ok := strings.CutSuffix(strings.ToLower(qname), ".in-addr.arpa.")
	if !ok {
		return "", false
	}
	labels := strings.Split(rest, ".")
	if len(labels) != 4 {
		return "", false
	}
	var b [4]byte
	for i, l := range labels {
		n, err := strconv.ParseUint(l, 10, 8)
		if err != nil {
			return "", false
		}
		b[3-i] = byte(n)
	}
	return p.fake.name(netip.AddrFrom4(b))
}

// buildDNS packs a response: header h, the question q (when not nil) and, when body is not
// nil, one answer for q's name with TTL 0.
func buildDNS(h dnsmessage.Header, q *dnsmessage.Question, body dnsmessage.ResourceBody) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
	b.EnableCompression()
	if q != nil {
		if err := b.StartQuestions(); err != nil {
			return nil
		}
		if err := b.Question(*q); err != nil {
			return nil
		}
	}
	if body != nil {
		if err := b.StartAnswers(); err != nil {
			return nil
		}
		rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
		var err error
		switch r := body.(type) {
		case *dnsmessage.AResource:
			err = b.AResource(rh, *r)
		case *dnsmessage.PTRResource:
			err = b.PTRResource(rh, *r)
		default:
			err = errors.New("unsupported record")
		}
		if err != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
