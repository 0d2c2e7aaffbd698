// Package dnsquery packs DNS queries for the tests and the escape probe that talk to the sandbox's
// DNS stub.
package dnsquery

import (
	"fmt"

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
