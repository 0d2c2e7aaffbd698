package egress

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

// registryRows are the rows of the IANA IPv4 and IPv6 Special-Purpose Address Registries (and
// the ranges egress adds to them, see specials), each with an address inside it and outside any
// more specific row.
var registryRows = []struct{ prefix, addr string }{
	{"0.0.0.0/8", "0.1.2.3"},
	{"0.0.0.0/32", "0.0.0.0"},
	{"10.0.0.0/8", "10.255.0.1"},
	{"100.64.0.0/10", "100.127.255.254"},
	{"127.0.0.0/8", "127.5.5.5"},
	{"169.254.0.0/16", "169.254.1.1"},
	{"172.16.0.0/12", "172.31.255.1"},
	{"192.0.0.0/24", "192.0.0.100"},
	{"192.0.0.0/29", "192.0.0.1"},
	{"192.0.0.8/32", "192.0.0.8"},
	{"192.0.0.9/32", "192.0.0.9"},
	{"192.0.0.10/32", "192.0.0.10"},
	{"192.0.0.170/32", "192.0.0.170"},
	{"192.0.0.171/32", "192.0.0.171"},
	{"192.0.2.0/24", "192.0.2.45"},
	{"192.31.196.0/24", "192.31.196.1"},
	{"192.52.193.0/24", "192.52.193.1"},
	{"192.88.99.0/24", "192.88.99.1"},
	{"192.88.99.2/32", "192.88.99.2"},
	{"192.168.0.0/16", "192.168.1.1"},
	{"192.175.48.0/24", "192.175.48.6"},
	{"198.18.0.0/15", "198.19.255.1"},
	{"198.51.100.0/24", "198.51.100.7"},
	{"203.0.113.0/24", "203.0.113.9"},
	{"240.0.0.0/4", "250.1.2.3"},
	{"255.255.255.255/32", "255.255.255.255"},
	{"::1/128", "::1"},
	{"::/128", "::"},
	{"::ffff:0:0/96", "::ffff:0.0.0.0"}, // maps to 0.0.0.0: judged as IPv4, see TestBlockedReasonEmbedded
	{"64:ff9b::/96", "64:ff9b::808:808"},
	{"64:ff9b:1::/48", "64:ff9b:1:ffff::"},
	{"100::/64", "100::1"},
	{"100:0:0:1::/64", "100:0:0:1::1"},
	{"2001::/23", "2001:1ff::1"},
	{"2001::/32", "2001::1"},
	{"2001:1::1/128", "2001:1::1"},
	{"2001:1::2/128", "2001:1::2"},
	{"2001:1::3/128", "2001:1::3"},
	{"2001:2::/48", "2001:2::1"},
	{"2001:3::/32", "2001:3::1"},
	{"2001:4:112::/48", "2001:4:112::1"},
	{"2001:10::/28", "2001:10::1"},
	{"2001:20::/28", "2001:20::1"},
	{"2001:30::/28", "2001:30::1"},
	{"2001:db8::/32", "2001:db8::1"},
	{"2002::/16", "2002:808:808::1"},
	{"2620:4f:8000::/48", "2620:4f:8000::53"},
	{"3fff::/20", "3fff:fff::1"},
	{"5f00::/16", "5f00::1"},
	{"fc00::/7", "fd12::1"},
	{"fe80::/10", "fe80::1"},
	{"224.0.0.0/4", "239.1.1.1"},
	{"ff00::/8", "ff0e::1"},
	{"fec0::/10", "fec0::1"},
	{"::/96", "::1.2.3.4"},
	{"::ffff:0:0:0/96", "::ffff:0:8.8.8.8"},
}

// TestSpecialsEveryRow checks that each registry row is refused and named by its own row, and
// that specials holds no row this test does not know.
func TestSpecialsEveryRow(t *testing.T) {
	known := map[string]bool{}
	for _, r := range registryRows {
		pfx, a := netip.MustParsePrefix(r.prefix), netip.MustParseAddr(r.addr)
		known[pfx.String()] = true
		if !pfx.Contains(a) {
			t.Fatalf("test row %s: %s is outside it", r.prefix, a)
		}
		why := blockedReason(a)
		if why == "" {
			t.Errorf("%s (in %s) is not refused", a, r.prefix)
			continue
		}
		if a.Is4In6() {
			continue // judged as the IPv4 address it maps
		}
		if !strings.Contains(why, " "+r.prefix+", ") {
			t.Errorf("blockedReason(%s) = %q: want it named by the row %s", a, why, r.prefix)
		}
	}
	for _, s := range specials {
		if !known[s.prefix.String()] {
			t.Errorf("specials row %s (%s) has no test row", s.prefix, s.name)
		}
	}
}

// TestBlockedReasonEmbedded covers the addresses of issue 10 §7 and every IPv4-embedding form:
// the address is refused by its own row and the reason names the IPv4 address it embeds.
func TestBlockedReasonEmbedded(t *testing.T) {
	for a, want := range map[string]string{
		// Ordinary global unicast: allowed.
		"8.8.8.8":         "",
		"1.1.1.1":         "",
		"2606:4700::1111": "",
		"2a00:1450::1":    "",
		"::ffff:8.8.8.8":  "",

		"198.18.0.1":      "Benchmarking 198.18.0.0/15, RFC 2544",
		"192.0.0.1":       "IPv4 Service Continuity Prefix 192.0.0.0/29, RFC 7335",
		"169.254.169.254": "cloud metadata address",
		"168.63.129.16":   "cloud metadata address",
		"fd00:ec2::254":   "cloud metadata address",
		"::ffff:10.0.0.1": "Private-Use 10.0.0.0/8, RFC 1918",
		"4000::1":         "not IPv6 Global Unicast (outside 2000::/3)",

		"64:ff9b::a00:1":   "IPv4-IPv6 Translat. 64:ff9b::/96, RFC 6052, embedding 10.0.0.1 (Private-Use 10.0.0.0/8, RFC 1918)",
		"64:ff9b::808:808": "IPv4-IPv6 Translat. 64:ff9b::/96, RFC 6052, embedding 8.8.8.8",
		// Local-use NAT64 with a /96 prefix inside 64:ff9b:1::/48, and with the /48 layout
		// (RFC 6052 §2.2: 10.0 in bits 48–63, 0.1 in bits 72–87).
		"64:ff9b:1::a00:1":            "IPv4-IPv6 Translat. 64:ff9b:1::/48, RFC 8215, embedding 10.0.0.1 (Private-Use 10.0.0.0/8, RFC 1918)",
		"64:ff9b:1:a00:0:100::":       "IPv4-IPv6 Translat. 64:ff9b:1::/48, RFC 8215, embedding 10.0.0.1 (Private-Use 10.0.0.0/8, RFC 1918)",
		"64:ff9b:1:a00:0:100:808:808": "IPv4-IPv6 Translat. 64:ff9b:1::/48, RFC 8215, embedding 10.0.0.1 (Private-Use 10.0.0.0/8, RFC 1918), embedding 8.8.8.8",
		"2002:a00:1::1":               "6to4 2002::/16, RFC 3056, embedding 10.0.0.1 (Private-Use 10.0.0.0/8, RFC 1918)",
		"2002:c0a8:101::":             "6to4 2002::/16, RFC 3056, embedding 192.168.1.1 (Private-Use 192.168.0.0/16, RFC 1918)",
		"2002:808:808::1":             "6to4 2002::/16, RFC 3056, embedding 8.8.8.8",
		"2002:a9fe:a9fe::":            "6to4 2002::/16, RFC 3056, embedding 169.254.169.254 (cloud metadata address)",
		// RFC 4380 §4's example: server 65.54.227.120, client 192.0.2.45 behind port 40000.
		"2001:0:4136:e378:8000:63bf:3fff:fdd2": "TEREDO 2001::/32, RFC 4380, RFC 8190, embedding 65.54.227.120, embedding 192.0.2.45 (Documentation (TEST-NET-1) 192.0.2.0/24, RFC 5737)",
		// A Teredo client address that decodes to 10.0.0.1, the server to 127.0.0.1.
		"2001:0:7f00:1:8000:63bf:f5ff:fffe": "TEREDO 2001::/32, RFC 4380, RFC 8190, embedding 127.0.0.1 (Loopback 127.0.0.0/8, RFC 1122 §3.2.1.3), embedding 10.0.0.1 (Private-Use 10.0.0.0/8, RFC 1918)",
		"::127.0.0.1":                       "IPv4-compatible Address (deprecated) ::/96, RFC 4291 §2.5.5.1, embedding 127.0.0.1 (Loopback 127.0.0.0/8, RFC 1122 §3.2.1.3)",
		"::ffff:0:169.254.1.1":              "IPv4-translated Address ::ffff:0:0:0/96, RFC 6145 (SIIT), embedding 169.254.1.1 (Link Local 169.254.0.0/16, RFC 3927)",
	} {
		if got := blockedReason(netip.MustParseAddr(a)); got != want {
			t.Errorf("blockedReason(%s)\n got %q\nwant %q", a, got, want)
		}
	}
}

// TestCheckSpecialAndAdmitted resolves an allowed name to special addresses: each is refused
// unless --egress-admit (AdmitNets) admits it, and admitting a translation prefix does not admit
// the refused IPv4 addresses behind it.
func TestCheckSpecialAndAdmitted(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		admit []string
		want  bool
	}{
		{"198.18.0.1", nil, false},
		{"198.18.0.1", []string{"198.18.0.0/15"}, true},
		{"192.0.0.170", nil, false},
		{"2001:db8::1", nil, false},
		{"64:ff9b::808:808", nil, false},
		{"64:ff9b::808:808", []string{"64:ff9b::/96"}, true},
		{"64:ff9b::a00:1", []string{"64:ff9b::/96"}, false},
		{"64:ff9b::a00:1", []string{"64:ff9b::/96", "10.0.0.0/8"}, true},
		{"64:ff9b:1::a00:1", []string{"64:ff9b:1::/48"}, false},
		{"2002:a00:1::1", []string{"2002::/16"}, false},
		{"2001:0:7f00:1:8000:63bf:f5ff:fffe", []string{"2001::/32", "10.0.0.0/8"}, false}, // server 127.0.0.1
		{"10.0.0.1", []string{"10.0.0.0/8"}, true},
		{"8.8.8.8", nil, true},
	} {
		p := &Policy{Allow: []string{"name.test"}, Resolver: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr(tc.addr)}, nil
		}}
		for _, n := range tc.admit {
			p.AdmitNets = append(p.AdmitNets, netip.MustParsePrefix(n))
		}
		_, d := p.Check(context.Background(), "name.test", 443)
		if d.Allowed != tc.want {
			t.Errorf("%s admitting %v: allowed %v (%s), want %v", tc.addr, tc.admit, d.Allowed, d.Reason, tc.want)
		}
		if !tc.want && !strings.Contains(d.Reason, netip.MustParseAddr(tc.addr).Unmap().String()+" (") {
			t.Errorf("%s: reason %q does not name the address", tc.addr, d.Reason)
		}
	}
}
