package host

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/sandbox/egress"
)

// TestEgressConnLimitAudited: the operator's cap (SandboxOptions.EgressMaxConns) reaches a
// call's egress policy, and a flood of connections past it, served by egress.Serve, is audited
// through the call's aggregate: one cli.egress line, and the summary's count of every refusal.
func TestEgressConnLimitAudited(t *testing.T) {
	var out bytes.Buffer
	h := &Host{audit: &auditLog{w: &out}, opts: Options{Sandbox: SandboxOptions{EgressMaxConns: 2}}}
	pol := h.egressPolicy(&sandboxPolicyWithEgress, "conns", "c_conns")
	if pol.MaxConns != 2 {
		t.Fatalf("MaxConns %d, want the operator's 2", pol.MaxConns)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- egress.Serve(ctx, &egress.Listeners{SOCKS: ln}, pol, nil) }()

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	greet := func() (net.Conn, bool) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		c.Write([]byte{5, 1, 0})
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var m [2]byte
		_, err = io.ReadFull(c, m[:])
		if err == nil {
			return c, true
		}
		// Closed unread: EOF, or a reset when the greeting reached the socket first.
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("a connection past the cap: %v, want it closed at once", err)
		}
		return c, false
	}
	for range 2 {
		if _, ok := greet(); !ok {
			t.Fatal("a connection within the cap was not served")
		}
	}
	const flood = 50
	for range flood {
		if _, ok := greet(); ok {
			t.Fatal("a connection past the cap was served")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	recs := auditRecords(t, out.Bytes())
	lines, sums := recs["cli.egress"], recs["cli.egress_summary"]
	if len(lines) != 1 || lines[0]["reason"] != "connection limit 2 reached" || lines[0]["via"] != "socks5" || lines[0]["allowed"] != false {
		t.Errorf("cli.egress lines: %v, want one refusal for the connection limit", lines)
	}
	if len(sums) != 1 || sums[0]["refused_count"] != float64(flood) || sums[0]["call_id"] != "c_conns" {
		t.Errorf("summary %v, want %d refusals", sums, flood)
	}
}
