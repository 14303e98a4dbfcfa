package ssrf_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/laneway/laneway/internal/security/ssrf"
)

func newGuard(t *testing.T, cfg ssrf.Config) *ssrf.Guard {
	t.Helper()
	g, err := ssrf.NewGuard(cfg)
	if err != nil {
		t.Fatalf("NewGuard: %v", err)
	}
	return g
}

func TestCheck(t *testing.T) {
	g := newGuard(t, ssrf.Config{})
	tests := []struct {
		addr   string
		reason string // "" = allowed; otherwise a substring of the reason
	}{
		// Public addresses, and the edges of blocked ranges.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"11.0.0.0", ""},
		{"9.255.255.255", ""},
		{"126.255.255.255", ""},
		{"128.0.0.0", ""},
		{"172.15.255.255", ""},
		{"172.32.0.0", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"169.253.255.255", ""},
		{"198.17.255.255", ""},
		{"198.20.0.0", ""},
		{"223.255.255.255", ""},
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001:80b::200e", ""},
		{"::ffff:8.8.8.8", ""},                       // mapped public
		{"64:ff9b::808:808", ""},                     // NAT64 of 8.8.8.8
		{"2002:808:808::1", ""},                      // 6to4 of 8.8.8.8
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", ""}, // Teredo, client 8.8.8.8

		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"::1", "loopback"},
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.0.1", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "zoned"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.127.255.255", "carrier-grade NAT"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved"},
		{"169.254.169.254", "metadata"},
		{"fd00:ec2::254", "metadata"},
		{"100.100.100.200", "metadata"},
		{"192.0.0.192", "metadata"},
		{"192.0.2.1", "documentation"},
		{"198.51.100.7", "documentation"},
		{"203.0.113.9", "documentation"},
		{"2001:db8::1", "documentation"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"2001:2::1", "benchmarking"},
		{"192.88.99.1", "6to4 relay"},
		{"100::1", "discard"},
		{"fec0::1", "site-local"},
		{"::7f00:1", "IPv4-compatible"},
		{"::ffff:127.0.0.1", "IPv4-mapped loopback"},
		{"::ffff:10.1.2.3", "IPv4-mapped private"},
		{"::ffff:169.254.169.254", "IPv4-mapped cloud metadata"},
		{"::ffff:0.0.0.0", "IPv4-mapped unspecified"},
		{"64:ff9b::7f00:1", "NAT64-embedded loopback"},
		{"64:ff9b::a9fe:a9fe", "NAT64-embedded cloud metadata"},
		{"64:ff9b:1::a00:1", "local-use NAT64"},
		{"2002:7f00:1::1", "6to4-embedded loopback"},
		{"2002:c0a8:101::1", "6to4-embedded private"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo-embedded documentation"}, // RFC 4380's example: client 192.0.2.45
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo-embedded loopback"},      // client 127.0.0.1
		{"2001:0:a00:1:8000:63bf:f7f7:f7f7", "Teredo-embedded private"},           // server 10.0.0.1
		{"4000::1", "reserved"},                                                   // outside 2000::/3
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			err := g.Check(netip.MustParseAddr(tc.addr))
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Check(%s) = %v, want allowed", tc.addr, err)
				}
				return
			}
			var be *ssrf.BlockedError
			if !errors.As(err, &be) {
				t.Fatalf("Check(%s) = %v, want *BlockedError", tc.addr, err)
			}
			if be.Addr != netip.MustParseAddr(tc.addr) || !strings.Contains(be.Reason, tc.reason) {
				t.Fatalf("Check(%s) = %+v, want Addr %s and a reason containing %q", tc.addr, be, tc.addr, tc.reason)
			}
		})
	}
	if err := g.Check(netip.Addr{}); err == nil {
		t.Error("Check(zero Addr) allowed it")
	}
}

func TestAllowOpensExceptions(t *testing.T) {
	g := newGuard(t, ssrf.Config{Allow: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/8"), // not masked on purpose
		netip.MustParsePrefix("::ffff:10.0.0.0/104"),
		netip.MustParsePrefix("fd00::/8"),
	}})
	tests := []struct {
		addr    string
		allowed bool
	}{
		{"127.0.0.1", true},
		{"127.9.9.9", true},
		{"::ffff:127.0.0.1", true}, // allowed through its IPv4 form
		{"::ffff:10.1.2.3", true},  // allowed as given
		{"10.1.2.3", false},        // only the mapped form was listed
		{"::1", false},
		{"192.168.0.1", false},
		{"fd00:ec2::254", true}, // an explicit allow beats even metadata
		{"fc00::1", false},
		{"169.254.169.254", false},
	}
	for _, tc := range tests {
		if err := g.Check(netip.MustParseAddr(tc.addr)); (err == nil) != tc.allowed {
			t.Errorf("Check(%s) = %v, want allowed=%v", tc.addr, err, tc.allowed)
		}
	}
	if _, err := ssrf.NewGuard(ssrf.Config{Allow: []netip.Prefix{{}}}); err == nil {
		t.Error("NewGuard accepted an invalid prefix")
	}
}

// fakeResolver answers each lookup with the next answer in line (the last one
// repeats) and records the lookups.
type fakeResolver struct {
	mu      sync.Mutex
	answers [][]string
	err     error
	lookups []string // network + " " + host
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups = append(r.lookups, network+" "+host)
	if r.err != nil {
		return nil, r.err
	}
	i := min(len(r.lookups), len(r.answers)) - 1
	var out []netip.Addr
	for _, a := range r.answers[i] {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// dialRecorder is a Dial hook that records addresses, fails those listed in
// fail, and otherwise returns one end of a pipe.
type dialRecorder struct {
	mu     sync.Mutex
	dialed []string
	fail   map[string]bool
}

func (d *dialRecorder) dial(_ context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, address)
	d.mu.Unlock()
	if d.fail[address] {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
	}
	c1, c2 := net.Pipe()
	c2.Close()
	return c1, nil
}

func (d *dialRecorder) addresses() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

func TestDialRebindingDialsTheCheckedAddress(t *testing.T) {
	res := &fakeResolver{answers: [][]string{{"93.184.216.34"}, {"127.0.0.1"}}}
	rec := &dialRecorder{}
	g := newGuard(t, ssrf.Config{Resolver: res, Dial: rec.dial})
	ctx := t.Context()

	conn, err := g.DialContext(ctx, "tcp", "rebind.example:443")
	if err != nil {
		t.Fatalf("first dial: %v", err)
	}
	conn.Close()
	// The second answer flips to loopback: the guard must refuse, not dial.
	_, err = g.DialContext(ctx, "tcp", "rebind.example:443")
	var be *ssrf.BlockedError
	if !errors.As(err, &be) || be.Host != "rebind.example" || be.Addr != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("second dial = %v, want BlockedError for rebind.example (127.0.0.1)", err)
	}
	if got, want := rec.addresses(), []string{"93.184.216.34:443"}; !slices.Equal(got, want) {
		t.Fatalf("dialled %q, want %q: only the checked IP, never the name", got, want)
	}
	if len(res.lookups) != 2 {
		t.Fatalf("resolver called %d times, want once per dial (2)", len(res.lookups))
	}
}

func TestDialSkipsBlockedAndTriesAllowedInOrder(t *testing.T) {
	res := &fakeResolver{answers: [][]string{{"10.0.0.1", "93.184.216.34", "::ffff:169.254.169.254", "::ffff:8.8.4.4", "2606:4700::1"}}}
	rec := &dialRecorder{fail: map[string]bool{"93.184.216.34:80": true, "8.8.4.4:80": true}}
	g := newGuard(t, ssrf.Config{Resolver: res, Dial: rec.dial})
	conn, err := g.DialContext(t.Context(), "tcp", "mixed.example:80")
	if err != nil {
		t.Fatalf("DialContext: %v", err)
	}
	conn.Close()
	// Mapped addresses are dialled in their IPv4 form.
	want := []string{"93.184.216.34:80", "8.8.4.4:80", "[2606:4700::1]:80"}
	if got := rec.addresses(); !slices.Equal(got, want) {
		t.Fatalf("dialled %q, want %q", got, want)
	}
}

func TestDialReturnsFirstDialErrorWhenAllFail(t *testing.T) {
	res := &fakeResolver{answers: [][]string{{"93.184.216.34", "8.8.8.8"}}}
	rec := &dialRecorder{fail: map[string]bool{"93.184.216.34:80": true, "8.8.8.8:80": true}}
	g := newGuard(t, ssrf.Config{Resolver: res, Dial: rec.dial})
	_, err := g.DialContext(t.Context(), "tcp", "down.example:80")
	var oe *net.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("err = %v, want the dialer's *net.OpError", err)
	}
	if n := len(rec.addresses()); n != 2 {
		t.Fatalf("dialled %d addresses, want both (2)", n)
	}
}

func TestDialIPLiteralSkipsDNS(t *testing.T) {
	res := &fakeResolver{answers: [][]string{{"8.8.8.8"}}}
	rec := &dialRecorder{}
	g := newGuard(t, ssrf.Config{Resolver: res, Dial: rec.dial})
	conn, err := g.DialContext(t.Context(), "tcp", "[2606:4700::1]:8443")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	_, err = g.DialContext(t.Context(), "tcp", "[::ffff:127.0.0.1]:80")
	var be *ssrf.BlockedError
	if !errors.As(err, &be) {
		t.Fatalf("dial of mapped loopback literal = %v, want *BlockedError", err)
	}
	if len(res.lookups) != 0 {
		t.Fatalf("resolver called for IP literals: %q", res.lookups)
	}
	if got, want := rec.addresses(), []string{"[2606:4700::1]:8443"}; !slices.Equal(got, want) {
		t.Fatalf("dialled %q, want %q", got, want)
	}
}

func TestDialNetworkFamilyAndErrors(t *testing.T) {
	lookupErr := errors.New("SERVFAIL")
	tests := []struct {
		name, network, address string
		resolver               *fakeResolver
		wantLookup             string
		wantErr                func(error) bool
	}{
		{"tcp4 asks for ip4", "tcp4", "h.example:80", &fakeResolver{answers: [][]string{{"8.8.8.8"}}}, "ip4 h.example", isNil},
		{"tcp6 asks for ip6", "tcp6", "h.example:80", &fakeResolver{answers: [][]string{{"2606:4700::1"}}}, "ip6 h.example", isNil},
		{"resolver error wrapped", "tcp", "h.example:80", &fakeResolver{err: lookupErr}, "ip h.example", func(err error) bool { return errors.Is(err, lookupErr) }},
		{"empty answer", "tcp", "h.example:80", &fakeResolver{answers: [][]string{{}}}, "ip h.example", isErr},
		{"no port", "tcp", "h.example", &fakeResolver{}, "", isErr},
		{"named port", "tcp", "h.example:http", &fakeResolver{}, "", isErr},
		{"unsupported network", "unix", "h.example:80", &fakeResolver{}, "", isErr},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &dialRecorder{}
			g := newGuard(t, ssrf.Config{Resolver: tc.resolver, Dial: rec.dial})
			conn, err := g.DialContext(t.Context(), tc.network, tc.address)
			if conn != nil {
				conn.Close()
			}
			if !tc.wantErr(err) {
				t.Fatalf("err = %v", err)
			}
			if tc.wantLookup != "" && (len(tc.resolver.lookups) != 1 || tc.resolver.lookups[0] != tc.wantLookup) {
				t.Fatalf("lookups = %q, want [%q]", tc.resolver.lookups, tc.wantLookup)
			}
		})
	}
}

func isNil(err error) bool { return err == nil }
func isErr(err error) bool { return err != nil }

// End to end with the default dialer: a loopback server is refused unless
// allow-listed, by IP and by name.
func TestDialRealLoopbackServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "reached")
	}))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := &fakeResolver{answers: [][]string{{"127.0.0.1"}}}

	get := func(g *ssrf.Guard, url string) (string, error) {
		client := &http.Client{Transport: &http.Transport{DialContext: g.DialContext}}
		defer client.CloseIdleConnections()
		resp, err := client.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	byIP := srv.URL
	byName := "http://hooks.example:" + strconv.Itoa(port)

	closed := newGuard(t, ssrf.Config{Resolver: res})
	for _, url := range []string{byIP, byName} {
		_, err := get(closed, url)
		var be *ssrf.BlockedError
		if !errors.As(err, &be) || be.Reason != "loopback" {
			t.Errorf("GET %s without allow-list: err = %v, want loopback BlockedError", url, err)
		}
	}

	open := newGuard(t, ssrf.Config{Resolver: res, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	for _, url := range []string{byIP, byName} {
		body, err := get(open, url)
		if err != nil || body != "reached" {
			t.Errorf("GET %s with 127.0.0.0/8 allowed = %q, %v; want the server's reply", url, body, err)
		}
	}
}
