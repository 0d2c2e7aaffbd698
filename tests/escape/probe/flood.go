package main

import (
	"net"
	"strconv"

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
	n, step, err := dnsquery.Flood(c, repeats, distinct)
	if err != nil {
		return result(step, err)
	}
	return report{Result: "allowed", Step: "answer", Detail: strconv.Itoa(n)}
}
