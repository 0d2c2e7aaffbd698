package egress

import (
	"net/netip"
	"slices"
)

// special is one range egress refuses by default: a row of an IANA special-purpose address
// registry, or one of the few ranges below that the registries leave to others.
type special struct {
	prefix netip.Prefix
	name   string // the registry's Name
	ref    string // the registry's Reference
}

// specials are every row of
//
//   - the IANA IPv4 Special-Purpose Address Registry
//     (https://www.iana.org/assignments/iana-ipv4-special-registry/, RFC 6890, RFC 8190) and
//   - the IANA IPv6 Special-Purpose Address Registry
//     (https://www.iana.org/assignments/iana-ipv6-special-registry/),
//
// transcribed by hand, row by row in the registries' order, as they stood in 2025 (the IPv6
// registry's latest row 100:0:0:1::/64, RFC 9780; the IPv4 one's 192.88.99.2/32, RFC 6751). They
// were written without network access to iana.org, so compare them with the live registries
// when a registry changes; TestSpecialsEveryRow pins one address per row. They are followed by
// the ranges the special-purpose registries do not list but other IANA registries set aside:
// IPv4 and IPv6 multicast, IPv6 site-local (deprecated) and the IPv4-embedding forms of RFC 4291
// and RFC 6145.
//
// Every row is refused, including those the registry marks "Globally Reachable: True" (the
// anycast relays of PCP, TURN and DNS-SD SRP, AS112 sinks, AMT relays, ORCHIDv2 and DET
// identifiers, the NAT64 well-known prefix): none is a general-purpose destination a CLI's
// HTTPS or SSH request should reach, several are answered by the host's own network rather
// than the Internet, and the translation prefixes reach IPv4 addresses that must be judged on
// their own (see embeddedIPv4). An operator who needs one admits it with --egress-admit
// (Policy.AdmitNets).
//
// Outside these rows, IPv6 is refused outside 2000::/3, the only range the IANA IPv6 Address
// Space registry allocates as Global Unicast (see blockedReason).
var specials = []special{
	// IPv4 Special-Purpose Address Registry.
	{mustPrefix("0.0.0.0/8"), "This network", "RFC 791 §3.2"},
	{mustPrefix("0.0.0.0/32"), "This host on this network", "RFC 1122 §3.2.1.3"},
	{mustPrefix("10.0.0.0/8"), "Private-Use", "RFC 1918"},
	{mustPrefix("100.64.0.0/10"), "Shared Address Space", "RFC 6598"},
	{mustPrefix("127.0.0.0/8"), "Loopback", "RFC 1122 §3.2.1.3"},
	{mustPrefix("169.254.0.0/16"), "Link Local", "RFC 3927"},
	{mustPrefix("172.16.0.0/12"), "Private-Use", "RFC 1918"},
	{mustPrefix("192.0.0.0/24"), "IETF Protocol Assignments", "RFC 6890 §2.1"},
	{mustPrefix("192.0.0.0/29"), "IPv4 Service Continuity Prefix", "RFC 7335"},
	{mustPrefix("192.0.0.8/32"), "IPv4 dummy address", "RFC 7600"},
	{mustPrefix("192.0.0.9/32"), "Port Control Protocol Anycast", "RFC 7723"},
	{mustPrefix("192.0.0.10/32"), "Traversal Using Relays around NAT Anycast", "RFC 8155"},
	{mustPrefix("192.0.0.170/32"), "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 §2.2"},
	{mustPrefix("192.0.0.171/32"), "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 §2.2"},
	{mustPrefix("192.0.2.0/24"), "Documentation (TEST-NET-1)", "RFC 5737"},
	{mustPrefix("192.31.196.0/24"), "AS112-v4", "RFC 7535"},
	{mustPrefix("192.52.193.0/24"), "AMT", "RFC 7450"},
	{mustPrefix("192.88.99.0/24"), "Deprecated (6to4 Relay Anycast)", "RFC 7526"},
	{mustPrefix("192.88.99.2/32"), "6a44-relay anycast address", "RFC 6751"},
	{mustPrefix("192.168.0.0/16"), "Private-Use", "RFC 1918"},
	{mustPrefix("192.175.48.0/24"), "Direct Delegation AS112 Service", "RFC 7534"},
	{mustPrefix("198.18.0.0/15"), "Benchmarking", "RFC 2544"},
	{mustPrefix("198.51.100.0/24"), "Documentation (TEST-NET-2)", "RFC 5737"},
	{mustPrefix("203.0.113.0/24"), "Documentation (TEST-NET-3)", "RFC 5737"},
	{mustPrefix("240.0.0.0/4"), "Reserved", "RFC 1112 §4"},
	{mustPrefix("255.255.255.255/32"), "Limited Broadcast", "RFC 8190, RFC 919 §7"},

	// IPv6 Special-Purpose Address Registry.
	{mustPrefix("::1/128"), "Loopback Address", "RFC 4291"},
	{mustPrefix("::/128"), "Unspecified Address", "RFC 4291"},
	{mustPrefix("::ffff:0:0/96"), "IPv4-mapped Address", "RFC 4291"},
	{mustPrefix("64:ff9b::/96"), "IPv4-IPv6 Translat.", "RFC 6052"},
	{mustPrefix("64:ff9b:1::/48"), "IPv4-IPv6 Translat.", "RFC 8215"},
	{mustPrefix("100::/64"), "Discard-Only Address Block", "RFC 6666"},
	{mustPrefix("100:0:0:1::/64"), "Dummy IPv6 Prefix", "RFC 9780"},
	{mustPrefix("2001::/23"), "IETF Protocol Assignments", "RFC 2928"},
	{mustPrefix("2001::/32"), "TEREDO", "RFC 4380, RFC 8190"},
	{mustPrefix("2001:1::1/128"), "Port Control Protocol Anycast", "RFC 7723"},
	{mustPrefix("2001:1::2/128"), "Traversal Using Relays around NAT Anycast", "RFC 8155"},
	{mustPrefix("2001:1::3/128"), "DNS-SD Service Registration Protocol Anycast Address", "RFC 9665"},
	{mustPrefix("2001:2::/48"), "Benchmarking", "RFC 5180, RFC Errata 1752"},
	{mustPrefix("2001:3::/32"), "AMT", "RFC 7450"},
	{mustPrefix("2001:4:112::/48"), "AS112-v6", "RFC 7535"},
	{mustPrefix("2001:10::/28"), "Deprecated (previously ORCHID)", "RFC 4843"},
	{mustPrefix("2001:20::/28"), "ORCHIDv2", "RFC 7343"},
	{mustPrefix("2001:30::/28"), "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374"},
	{mustPrefix("2001:db8::/32"), "Documentation", "RFC 3849"},
	{mustPrefix("2002::/16"), "6to4", "RFC 3056"},
	{mustPrefix("2620:4f:8000::/48"), "Direct Delegation AS112 Service", "RFC 7534"},
	{mustPrefix("3fff::/20"), "Documentation", "RFC 9637"},
	{mustPrefix("5f00::/16"), "Segment Routing (SRv6) SIDs", "RFC 9602"},
	{mustPrefix("fc00::/7"), "Unique-Local", "RFC 4193, RFC 8190"},
	{mustPrefix("fe80::/10"), "Link-Local Unicast", "RFC 4291"},

	// Not in the special-purpose registries.
	{mustPrefix("224.0.0.0/4"), "Multicast", "RFC 5771 (IANA IPv4 Multicast Address Space)"},
	{mustPrefix("ff00::/8"), "Multicast", "RFC 4291 (IANA IPv6 Address Space)"},
	{mustPrefix("fec0::/10"), "Site-Local (deprecated)", "RFC 3879 (IANA IPv6 Address Space)"},
	{mustPrefix("::/96"), "IPv4-compatible Address (deprecated)", "RFC 4291 §2.5.5.1"},
	{mustPrefix("::ffff:0:0:0/96"), "IPv4-translated Address", "RFC 6145 (SIIT)"},
}

// metadata are the cloud providers' instance metadata and host-agent addresses, named as such in
// refusals: AWS, GCP, Azure, OpenStack and DigitalOcean (169.254.169.254, AWS's IPv6
// fd00:ec2::254), AWS ECS task metadata (169.254.170.2), Alibaba (100.100.100.200), Oracle
// (192.0.0.192) and Azure's WireServer (168.63.129.16), which lies in public space and would be
// reachable otherwise.
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("169.254.170.2"), netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("192.0.0.192"), netip.MustParseAddr("168.63.129.16"),
}

// globalUnicast6 is the IPv6 Global Unicast space (IANA IPv6 Address Space registry).
var globalUnicast6 = mustPrefix("2000::/3")

// mustPrefix parses a prefix of the tables above.
func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// blockedReason says why egress refuses a by default ("" for an ordinary global unicast
// address): the most specific row of specials containing a, a metadata address, IPv6 outside
// 2000::/3; and, for an address embedding an IPv4 address (NAT64, 6to4, Teredo, IPv4-compatible
// and -translated), the embedded address and what it is. Such addresses are refused whatever
// they embed: their own row refuses them. An IPv4-mapped address is judged as the IPv4 address
// it maps (the address a dialer connects to).
func blockedReason(a netip.Addr) string {
	a = a.Unmap()
	why := classify(a)
	if why == "" {
		return ""
	}
	for _, e := range embeddedIPv4(a) {
		why += ", embedding " + e.String()
		if w := classify(e); w != "" {
			why += " (" + w + ")"
		}
	}
	return why
}

// classify names the class of a that egress refuses, ignoring what a embeds; "" when none.
func classify(a netip.Addr) string {
	if slices.Contains(metadata, a) {
		return "cloud metadata address"
	}
	if s, ok := mostSpecific(a); ok {
		return s.name + " " + s.prefix.String() + ", " + s.ref
	}
	if a.Is6() && !globalUnicast6.Contains(a) {
		return "not IPv6 Global Unicast (outside 2000::/3)"
	}
	return ""
}

// mostSpecific returns the longest row of specials containing a.
func mostSpecific(a netip.Addr) (special, bool) {
	var best special
	for _, s := range specials {
		if s.prefix.Contains(a) && (!best.prefix.IsValid() || s.prefix.Bits() > best.prefix.Bits()) {
			best = s
		}
	}
	return best, best.prefix.IsValid()
}

var (
	nat64WKP    = mustPrefix("64:ff9b::/96")
	nat64Local  = mustPrefix("64:ff9b:1::/48")
	sixToFour   = mustPrefix("2002::/16")
	teredo      = mustPrefix("2001::/32")
	compat      = mustPrefix("::/96")
	siit        = mustPrefix("::ffff:0:0:0/96")
	thisNetwork = mustPrefix("0.0.0.0/8")
)

// embeddedIPv4 returns the IPv4 addresses a carries for a translator or tunnel to reach:
//   - NAT64 well-known prefix 64:ff9b::/96 (RFC 6052): the last 32 bits;
//   - NAT64 local-use 64:ff9b:1::/48 (RFC 8215): the operator may use a /48, /56, /64 or /96
//     network-specific prefix inside it, and RFC 6052 §2.2 places the IPv4 address differently
//     for each (around the reserved bits 64–71), so every distinct candidate is returned,
//     except those in 0.0.0.0/8, which no translator forwards to (mostly the zero bits of a
//     layout that does not apply);
//   - 6to4 2002:AABB:CCDD::/48 (RFC 3056): bits 16–47;
//   - Teredo 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC (RFC 4380 §4): the server (bits 32–63) and
//     the client (the last 32 bits, inverted);
//   - IPv4-compatible ::a.b.c.d and IPv4-translated ::ffff:0:a.b.c.d: the last 32 bits.
func embeddedIPv4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(x ...byte) netip.Addr { return netip.AddrFrom4([4]byte(x)) }
	switch {
	case nat64WKP.Contains(a), siit.Contains(a):
		return []netip.Addr{v4(b[12:]...)}
	case compat.Contains(a):
		if a.IsUnspecified() || a.IsLoopback() {
			return nil
		}
		return []netip.Addr{v4(b[12:]...)}
	case nat64Local.Contains(a):
		var out []netip.Addr
		for _, c := range []netip.Addr{
			v4(b[6], b[7], b[9], b[10]),   // /48
			v4(b[7], b[9], b[10], b[11]),  // /56
			v4(b[9], b[10], b[11], b[12]), // /64
			v4(b[12:]...),                 // /96
		} {
			if !thisNetwork.Contains(c) && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
		return out
	case sixToFour.Contains(a):
		return []netip.Addr{v4(b[2:6]...)}
	case teredo.Contains(a):
		return []netip.Addr{v4(b[4:8]...), v4(^b[12], ^b[13], ^b[14], ^b[15])}
	}
	return nil
}

// admittedWhole reports whether AdmitNets admit a and every IPv4 address a embeds is either
// admitted too or not refused: admitting a translation or tunnel prefix (64:ff9b::/96 on a
// DNS64 network) admits the translation, not every IPv4 address behind it.
func (p *Policy) admittedWhole(a netip.Addr) bool {
	if !p.admitted(a) {
		return false
	}
	for _, e := range embeddedIPv4(a) {
		if !p.admitted(e) && classify(e) != "" {
			return false
		}
	}
	return true
}
