// Package dnsquery packs DNS queries, and floods a DNS server with them, for the tests and the
// escape probe that talk to the sandbox's DNS stub.
package dnsquery

import (
	"fmt"
	"net"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// A packs a recursive query for the A records of name, with id.
func A(id uint16, name string) ([]byte, error) {
	n, err := dnsmessage.NewName(name)
	if err != nil {
		return nil, fmt.Errorf("dns name %q: %w", name, err)
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		return nil, fmt.Errorf("dns query for %q: %w", name, err)
	}
	if err := b.Question(dnsmessage.Question{Name: n, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}); err != nil {
		return nil, fmt.Errorf("dns query for %q: %w", name, err)
	}
	return b.Finish()
}

// Flood sends repeats A queries for flood.invalid. and then one for each of distinct other names
// (nI.flood.invalid.) on c, one at a time, waiting (10 s at most) for each answer, which must be
// NXDOMAIN with the query's id. It returns how many queries were answered and, on an error, the
// step that failed: "pack", "send", "receive" or "answer".
func Flood(c net.Conn, repeats, distinct int) (answered int, step string, err error) {
	buf := make([]byte, 4096)
	for i := range repeats + distinct {
		name := "flood.invalid."
		if i >= repeats {
			name = fmt.Sprintf("n%d.flood.invalid.", i)
		}
		q, err := A(uint16(i), name)
		if err != nil {
			return i, "pack", err
		}
		if _, err := c.Write(q); err != nil {
			return i, "send", err
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			return i, "receive", fmt.Errorf("answer %d: %w", i, err)
		}
		var p dnsmessage.Parser
		if h, err := p.Start(buf[:n]); err != nil || h.ID != uint16(i) || h.RCode != dnsmessage.RCodeNameError {
			return i, "answer", fmt.Errorf("answer %d: id %d rcode %v (%v), want NXDOMAIN", i, h.ID, h.RCode, err)
		}
	}
	return repeats + distinct, "", nil
}
