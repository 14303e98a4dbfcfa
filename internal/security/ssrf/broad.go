package ssrf

import (
	"net/netip"
	"slices"
)

// CoversAllPublic returns the address families ("IPv4", "IPv6") whose
// every public address allow covers, in one prefix (0.0.0.0/0, ::/0) or
// several. Public addresses are always reachable, so a list that covers
// them all says "everything": it was meant to turn the guard off, and it
// does for whatever private, loopback or metadata range it also covers.
// Public is what the rules do not refuse: IPv4 outside them, IPv6 global
// unicast (2000::/3) outside them.
func CoversAllPublic(allow []netip.Prefix) []string {
	r := newRules()
	var out []string
	if covers(netip.MustParsePrefix("0.0.0.0/0"), allow, r.v4) {
		out = append(out, "IPv4")
	}
	if covers(r.globalUnicast, allow, r.v6) {
		out = append(out, "IPv6")
	}
	return out
}

// covers reports whether the allowed prefixes and the refused ones
// together cover every address of target.
func covers(target netip.Prefix, allow []netip.Prefix, refused []rule) bool {
	var ps []netip.Prefix
	for _, p := range allow {
		if p.IsValid() && p.Addr().Is4() == target.Addr().Is4() {
			ps = append(ps, p.Masked())
		}
	}
	for _, r := range refused {
		ps = append(ps, r.prefix)
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	next, end := target.Addr(), lastAddr(target)
	for _, p := range ps {
		if next.Less(p.Addr()) {
			return false // a gap before p
		}
		if l := lastAddr(p); !l.Less(next) {
			if !l.Less(end) {
				return true
			}
			next = l.Next()
		}
	}
	return false
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := range b {
		switch netBits := p.Bits() - i*8; {
		case netBits <= 0:
			b[i] = 0xff
		case netBits < 8:
			b[i] |= 0xff >> netBits
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
