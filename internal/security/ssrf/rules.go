package ssrf

import "net/netip"

// rule refuses the addresses of one prefix for the stated reason.
type rule struct {
	prefix netip.Prefix
	reason string
}

// rules is the fixed policy. It is built per Guard rather than held in a
// package variable so that nothing can change it behind a Guard's back.
type rules struct {
	v4, v6        []rule
	globalUnicast netip.Prefix // 2000::/3; IPv6 outside it is reserved
	nat64         netip.Prefix // 64:ff9b::/96, RFC 6052 well-known prefix
	sixToFour     netip.Prefix // 2002::/16, RFC 3056
	teredo        netip.Prefix // 2001::/32, RFC 4380
}

// newRules lists the refused ranges. Where ranges nest, the narrower comes
// first so that the reason names the more telling category (metadata before
// link-local).
func newRules() rules {
	return rules{
		v4: parseRules(
			"169.254.169.254/32", "cloud metadata", // AWS, GCP, Azure, OpenStack
			"100.100.100.200/32", "cloud metadata", // Alibaba
			"192.0.0.192/32", "cloud metadata", // Oracle
			"168.63.129.16/32", "cloud metadata", // Azure WireServer and host agent, reachable from every Azure VM
			"255.255.255.255/32", "broadcast",
			"0.0.0.0/32", "unspecified",
			"0.0.0.0/8", "this-network",
			"10.0.0.0/8", "private",
			"100.64.0.0/10", "carrier-grade NAT",
			"127.0.0.0/8", "loopback",
			"169.254.0.0/16", "link-local",
			"172.16.0.0/12", "private",
			"192.0.0.0/24", "IETF protocol assignment",
			"192.0.2.0/24", "documentation",
			"192.88.99.0/24", "6to4 relay anycast",
			"192.168.0.0/16", "private",
			"198.18.0.0/15", "benchmarking",
			"198.51.100.0/24", "documentation",
			"203.0.113.0/24", "documentation",
			"224.0.0.0/4", "multicast",
			"240.0.0.0/4", "reserved",
		),
		v6: parseRules(
			"fd00:ec2::254/128", "cloud metadata", // AWS
			"::/128", "unspecified",
			"::1/128", "loopback",
			"::/96", "IPv4-compatible (deprecated)",
			"64:ff9b:1::/48", "local-use NAT64",
			"100::/64", "discard-only",
			"2001:2::/48", "benchmarking",
			"2001:db8::/32", "documentation",
			"3fff::/20", "documentation",
			"fc00::/7", "unique local (private)",
			"fe80::/10", "link-local",
			"fec0::/10", "site-local",
			"ff00::/8", "multicast",
		),
		globalUnicast: netip.MustParsePrefix("2000::/3"),
		nat64:         netip.MustParsePrefix("64:ff9b::/96"),
		sixToFour:     netip.MustParsePrefix("2002::/16"),
		teredo:        netip.MustParsePrefix("2001::/32"),
	}
}

// parseRules reads prefix, reason pairs.
func parseRules(pairs ...string) []rule {
	out := make([]rule, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, rule{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// blockedReason returns why addr is refused, or "" if it may be reached.
func (r rules) blockedReason(addr netip.Addr) string {
	switch {
	case !addr.IsValid():
		return "invalid"
	case addr.Zone() != "":
		// Only non-global addresses need a zone, and a zone picks a local
		// interface: nothing a public endpoint has.
		return "zoned"
	case addr.Is4():
		return match(r.v4, addr)
	case addr.Is4In6():
		// Dialling ::ffff:a.b.c.d reaches a.b.c.d.
		return embedded("IPv4-mapped", match(r.v4, addr.Unmap()))
	}
	return r.reason6(addr)
}

func (r rules) reason6(addr netip.Addr) string {
	if reason := match(r.v6, addr); reason != "" {
		return reason
	}
	if embeddedChecked, reason := r.embeddedReason(addr); embeddedChecked {
		return reason
	}
	if !r.globalUnicast.Contains(addr) {
		return "reserved"
	}
	return ""
}

// embeddedReason checks the IPv4 addresses that transition mechanisms carry
// inside an IPv6 address, because a gateway on the path may deliver the
// packet to that IPv4 address. checked is false when addr embeds none.
func (r rules) embeddedReason(addr netip.Addr) (checked bool, reason string) {
	b := addr.As16()
	switch {
	case r.nat64.Contains(addr):
		return true, embedded("NAT64-embedded", match(r.v4, v4(b[12:16], 0)))
	case r.sixToFour.Contains(addr):
		return true, embedded("6to4-embedded", match(r.v4, v4(b[2:6], 0)))
	case r.teredo.Contains(addr):
		// RFC 4380: the server's address is in clear, the client's is
		// inverted.
		if reason := match(r.v4, v4(b[4:8], 0)); reason != "" {
			return true, embedded("Teredo-embedded", reason)
		}
		return true, embedded("Teredo-embedded", match(r.v4, v4(b[12:16], 0xff)))
	}
	return false, ""
}

func v4(b []byte, xor byte) netip.Addr {
	return netip.AddrFrom4([4]byte{b[0] ^ xor, b[1] ^ xor, b[2] ^ xor, b[3] ^ xor})
}

func embedded(kind, reason string) string {
	if reason == "" {
		return ""
	}
	return kind + " " + reason
}

func match(rs []rule, addr netip.Addr) string {
	for _, r := range rs {
		if r.prefix.Contains(addr) {
			return r.reason
		}
	}
	return ""
}
