// Package ssrf keeps outbound webhook requests away from addresses a customer
// must not reach through us: loopback, private and link-local networks, cloud
// metadata services, and IPv6 forms that embed such IPv4 addresses.
//
// Guard.DialContext resolves the target itself, checks every address, and
// dials an address it checked, by IP, so that a DNS answer that changes
// between the check and the connection (DNS rebinding) cannot slip through.
// Plug it into an http.Transport as DialContext, with Proxy left nil: a proxy
// would resolve the name again, out of the guard's sight.
package ssrf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// Resolver looks up the addresses of a host. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc opens a connection; the guard only ever passes it an "ip:port".
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Config configures a Guard.
type Config struct {
	// Allow lists networks that may be reached even though a rule would
	// refuse them, e.g. 10.0.0.0/8 for an on-premises installation or
	// 127.0.0.0/8 in tests. An address is allowed if a prefix contains it as
	// given or, for an IPv4-mapped IPv6 address, its IPv4 form.
	// Default: none.
	Allow []netip.Prefix

	// Resolver resolves host names. Default: net.DefaultResolver.
	Resolver Resolver

	// Dial connects to a checked "ip:port". Default: a net.Dialer with a 5 s
	// connect timeout and 30 s TCP keep-alive; the caller's context deadline
	// still bounds the whole dial.
	Dial DialFunc
}

// Default dialer settings.
const (
	defaultConnectTimeout = 5 * time.Second
	defaultKeepAlive      = 30 * time.Second
)

// Guard checks addresses and dials only allowed ones. It is safe for
// concurrent use. Build it with NewGuard.
type Guard struct {
	allow    []netip.Prefix
	resolver Resolver
	dial     DialFunc
	rules    rules
}

// NewGuard builds a Guard. It fails on an invalid Allow prefix.
func NewGuard(cfg Config) (*Guard, error) {
	g := &Guard{resolver: cfg.Resolver, dial: cfg.Dial, rules: newRules()}
	for _, p := range cfg.Allow {
		if !p.IsValid() {
			return nil, fmt.Errorf("ssrf: invalid allow prefix %v", p)
		}
		g.allow = append(g.allow, p.Masked())
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.dial == nil {
		d := &net.Dialer{Timeout: defaultConnectTimeout, KeepAlive: defaultKeepAlive}
		g.dial = d.DialContext
	}
	return g, nil
}

// Check returns nil if addr may be connected to, and a *BlockedError (with
// an empty Host) saying why not otherwise.
func (g *Guard) Check(addr netip.Addr) error {
	if g.allowed(addr) {
		return nil
	}
	if reason := g.rules.blockedReason(addr); reason != "" {
		return &BlockedError{Addr: addr, Reason: reason}
	}
	return nil
}

func (g *Guard) allowed(addr netip.Addr) bool {
	for _, p := range g.allow {
		if p.Contains(addr) || p.Contains(addr.Unmap()) {
			return true
		}
	}
	return false
}

// DialContext connects to address ("host:port") like net.Dialer.DialContext,
// but only to resolved addresses that pass Check. It tries them in the
// resolver's order and skips blocked ones: a name that resolves to a public
// and a private address reaches only the public one. When none is allowed it
// returns the first *BlockedError, with Host set. IP literals are not
// resolved. The address dialled is always the checked IP, never the name.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := splitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := g.resolve(ctx, network, host)
	if err != nil {
		return nil, err
	}
	allowed, blocked := g.partition(host, addrs)
	if len(allowed) == 0 {
		return nil, blocked
	}
	return g.dialFirst(ctx, network, allowed, port)
}

func splitHostPort(address string) (string, uint16, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return "", 0, fmt.Errorf("ssrf: %w", err)
	}
	// Transports always pass a numeric port; a service name would need a
	// lookup outside the guard's resolver.
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("ssrf: port %q is not a number", portStr)
	}
	return host, uint16(port), nil
}

// resolve returns host's addresses, or the address itself for an IP literal.
func (g *Guard) resolve(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if addr, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{addr}, nil
	}
	ipNetwork, err := lookupNetwork(network)
	if err != nil {
		return nil, err
	}
	addrs, err := g.resolver.LookupNetIP(ctx, ipNetwork, host)
	if err != nil {
		return nil, fmt.Errorf("ssrf: resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("ssrf: resolve %s: no addresses", host)
	}
	return addrs, nil
}

func lookupNetwork(network string) (string, error) {
	switch network {
	case "tcp", "udp":
		return "ip", nil
	case "tcp4", "udp4":
		return "ip4", nil
	case "tcp6", "udp6":
		return "ip6", nil
	}
	return "", fmt.Errorf("ssrf: unsupported network %q", network)
}

// partition splits addrs into those allowed, unmapped so the dialer sees a
// plain IPv4, and the first refusal (a *BlockedError naming host).
func (g *Guard) partition(host string, addrs []netip.Addr) (allowed []netip.Addr, firstBlocked error) {
	for _, addr := range addrs {
		err := g.Check(addr)
		if err == nil {
			allowed = append(allowed, addr.Unmap())
			continue
		}
		var be *BlockedError
		if firstBlocked == nil && errors.As(err, &be) {
			be.Host = host
			firstBlocked = be
		}
	}
	return allowed, firstBlocked
}

// dialFirst dials each address in turn and returns the first connection, or
// the first error if every dial fails.
func (g *Guard) dialFirst(ctx context.Context, network string, addrs []netip.Addr, port uint16) (net.Conn, error) {
	var firstErr error
	for _, addr := range addrs {
		conn, err := g.dial(ctx, network, netip.AddrPortFrom(addr, port).String())
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// BlockedError reports a target address the guard refused.
type BlockedError struct {
	Host   string     // the name being dialled; empty when from Check
	Addr   netip.Addr // the refused address
	Reason string     // the rule that refused it, e.g. "loopback"
}

func (e *BlockedError) Error() string {
	target := e.Addr.String()
	if e.Host != "" && e.Host != target {
		target = e.Host + " (" + target + ")"
	}
	return "ssrf: refusing to connect to " + target + ": " + e.Reason + " address not allowed"
}
