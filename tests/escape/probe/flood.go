package main

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/clihost/clihost/internal/dnsquery"
)

// dnsFlood REPEATS DISTINCT floods the sandbox's DNS stub (127.0.0.1:53) with names it refuses:
// REPEATS A queries for flood.invalid, then one for each of DISTINCT other names, one at a time.
// It is allowed when every query got its NXDOMAIN answer, with the number of answers as detail;
// each refused query is an egress decision the host audits (issue 10 §6).
func dnsFlood(args []string) report {
	if r := need(args, 2); r != nil {
		return *r
	}
	repeats, err1 := strconv.Atoi(args[0])
	distinct, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil {
		return report{Result: "denied", Step: "probe", Detail: "REPEATS and DISTINCT must be numbers"}
	}
	c, err := net.Dial("udp", "127.0.0.1:53")
	if err != nil {
		return result("connect", err)
	}
	defer c.Close()
	buf := make([]byte, 4096)
	for i := range repeats + distinct {
		name := "flood.invalid."
		if i >= repeats {
			name = fmt.Sprintf("n%d.flood.invalid.", i)
		}
		q, err := dnsquery.A(uint16(i), name)
		if err != nil {
			return result("pack", err)
		}
		if _, err := c.Write(q); err != nil {
			return result("send", err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			return result("receive", err)
		}
		var p dnsmessage.Parser
		if h, err := p.Start(buf[:n]); err != nil || h.ID != uint16(i) || h.RCode != dnsmessage.RCodeNameError {
			return report{Result: "denied", Step: "answer", Detail: fmt.Sprintf("query %d: id %d rcode %v (%v), want NXDOMAIN", i, h.ID, h.RCode, err)}
		}
	}
	return report{Result: "allowed", Step: "answer", Detail: strconv.Itoa(repeats + distinct)}
}
