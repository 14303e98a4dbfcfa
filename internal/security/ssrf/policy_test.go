package ssrf_test

// The outbound policy, category by category, as the delivery contract
// states it: private, loopback, link-local, cloud metadata and unspecified
// addresses are refused in every form that reaches them (IPv4, IPv6,
// IPv4-mapped, IPv4-compatible, NAT64, 6to4); DNS rebinding cannot slip a
// refused address past the check; only the allow list opens exceptions, and
// exactly the prefixes it lists.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/laneway/laneway/internal/security/ssrf"
)

// blocked lists, per category, every form of the refused addresses the
// guard must recognise, and a substring of the reason it must give.
var blocked = []struct {
	category string
	addrs    []string
	reason   string
}{
	{"private", []string{
		"10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.254", "192.168.0.1", "192.168.255.255",
		"fc00::1", "fd12:3456:789a::1", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	}, "private"},
	{"private, IPv4-mapped", []string{"::ffff:10.0.0.1", "::ffff:172.16.0.1", "::ffff:192.168.1.1", "::ffff:a00:1"}, "IPv4-mapped private"},
	{"private, NAT64", []string{"64:ff9b::a00:1", "64:ff9b::c0a8:101"}, "NAT64-embedded private"},
	{"private, 6to4", []string{"2002:a00:1::1", "2002:c0a8:101::"}, "6to4-embedded private"},
	{"private, IPv4-compatible", []string{"::10.0.0.1", "::192.168.1.1"}, "IPv4-compatible"},

	{"loopback", []string{"127.0.0.1", "127.0.0.2", "127.255.255.255", "::1"}, "loopback"},
	{"loopback, IPv4-mapped", []string{"::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:127.1.2.3"}, "IPv4-mapped loopback"},
	{"loopback, NAT64", []string{"64:ff9b::7f00:1"}, "NAT64-embedded loopback"},
	{"loopback, 6to4", []string{"2002:7f00:1::1"}, "6to4-embedded loopback"},
	{"loopback, Teredo", []string{"2001:0:4136:e378:8000:63bf:80ff:fffe"}, "Teredo-embedded loopback"},
	{"loopback, IPv4-compatible", []string{"::127.0.0.1"}, "IPv4-compatible"},

	{"link-local", []string{"169.254.0.1", "169.254.255.255", "fe80::1", "febf:ffff::1"}, "link-local"},
	{"link-local, zoned", []string{"fe80::1%eth0", "fe80::1%1"}, "zoned"},
	{"link-local, IPv4-mapped", []string{"::ffff:169.254.1.1"}, "IPv4-mapped link-local"},
	{"link-local, NAT64", []string{"64:ff9b::a9fe:101"}, "NAT64-embedded link-local"},

	{"cloud metadata", []string{
		"169.254.169.254", // AWS, GCP, Azure, OpenStack, DigitalOcean, …
		"fd00:ec2::254",   // AWS over IPv6
		"100.100.100.200", // Alibaba
		"192.0.0.192",     // Oracle
		"168.63.129.16",   // Azure WireServer
	}, "cloud metadata"},
	{"cloud metadata, IPv4-mapped", []string{"::ffff:169.254.169.254", "::ffff:a9fe:a9fe", "::ffff:168.63.129.16"}, "IPv4-mapped cloud metadata"},
	{"cloud metadata, NAT64", []string{"64:ff9b::a9fe:a9fe", "64:ff9b::169.254.169.254"}, "NAT64-embedded cloud metadata"},
	{"cloud metadata, 6to4", []string{"2002:a9fe:a9fe::1"}, "6to4-embedded cloud metadata"},
	{"cloud metadata, IPv4-compatible", []string{"::169.254.169.254"}, "IPv4-compatible"},

	{"unspecified", []string{"0.0.0.0", "::", "0:0:0:0:0:0:0:0"}, "unspecified"},
	{"unspecified, IPv4-mapped", []string{"::ffff:0.0.0.0"}, "IPv4-mapped unspecified"},
	{"unspecified, NAT64", []string{"64:ff9b::"}, "NAT64-embedded unspecified"},
	{"unspecified, 6to4", []string{"2002::1"}, "6to4-embedded unspecified"},
	{"this network", []string{"0.0.0.1", "0.255.255.255"}, "this-network"},
}

// allowedPublic are public addresses in the same forms, which must pass.
var allowedPublic = []string{
	"93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:93.184.216.34",
	"64:ff9b::5db8:d822", "2002:5db8:d822::1", "168.63.129.15", "168.63.129.17",
}

// Every form of every refused category is refused by Check and by
// DialContext given it as a literal, without dialling anything.
func TestPolicyRefusesEveryForm(t *testing.T) {
	g := newGuard(t, ssrf.Config{Resolver: &fakeResolver{}, Dial: failDial(t)})
	for _, c := range blocked {
		for _, a := range c.addrs {
			t.Run(c.category+"/"+a, func(t *testing.T) {
				addr := netip.MustParseAddr(a)
				var be *ssrf.BlockedError
				if err := g.Check(addr); !errors.As(err, &be) || be.Addr != addr || !strings.Contains(be.Reason, c.reason) {
					t.Fatalf("Check(%s) = %v, want refused as %q", a, err, c.reason)
				}
				literal := net.JoinHostPort(a, "443")
				conn, err := g.DialContext(t.Context(), "tcp", literal)
				if conn != nil {
					conn.Close()
				}
				if !errors.As(err, &be) || be.Addr != addr || !strings.Contains(err.Error(), c.reason) {
					t.Fatalf("DialContext(%s) = %v, want refused as %q", literal, err, c.reason)
				}
			})
		}
	}
	for _, a := range allowedPublic {
		if err := g.Check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("Check(%s) = %v, want a public address allowed", a, err)
		}
	}
}

// failDial is a Dial hook that fails the test if it is ever called.
func failDial(t *testing.T) ssrf.DialFunc {
	return func(_ context.Context, _, address string) (net.Conn, error) {
		t.Errorf("dialled %s", address)
		return nil, errors.New("must not dial")
	}
}

// A name whose every address is refused is refused as a whole, with the
// first refusal, and nothing is dialled; a name with one public address
// among refused ones reaches only that one.
func TestPolicyNamesResolvingToRefusedAddresses(t *testing.T) {
	var all []string
	for _, c := range blocked {
		all = append(all, c.addrs...)
	}
	res := &fakeResolver{answers: [][]string{all}}
	g := newGuard(t, ssrf.Config{Resolver: res, Dial: failDial(t)})
	_, err := g.DialContext(t.Context(), "tcp", "metadata.google.internal:80")
	var be *ssrf.BlockedError
	if !errors.As(err, &be) || be.Host != "metadata.google.internal" || be.Addr != netip.MustParseAddr(all[0]) {
		t.Fatalf("err = %v, want the first refusal, for the name", err)
	}

	rec := &dialRecorder{}
	res = &fakeResolver{answers: [][]string{append(slices.Clone(all), "93.184.216.34")}}
	g = newGuard(t, ssrf.Config{Resolver: res, Dial: rec.dial})
	conn, err := g.DialContext(t.Context(), "tcp", "mixed.example:80")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if got := rec.addresses(); !slices.Equal(got, []string{"93.184.216.34:80"}) {
		t.Fatalf("dialled %q, want only the public address", got)
	}
}

// DNS rebinding: the resolver answers a public address first and a private
// one second. Through a real HTTP client whose transport dials through the
// guard, the first request reaches the address the guard checked (the dial
// hook stands in for the network and connects it to a local server), by IP
// and with one lookup; the second is refused, and the private answer is
// never dialled.
func TestPolicyRebindingPublicThenPrivate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "reached")
	}))
	t.Cleanup(srv.Close)
	const public = "93.184.216.34"

	for _, private := range []string{"10.0.0.1", "127.0.0.1", "169.254.169.254", "0.0.0.0", "::1", "::", "fd00:ec2::254", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::7f00:1"} {
		t.Run(private, func(t *testing.T) {
			res := &fakeResolver{answers: [][]string{{public}, {private}}}
			var mu sync.Mutex
			var dialled []string
			dialer := &net.Dialer{}
			g := newGuard(t, ssrf.Config{Resolver: res, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
				mu.Lock()
				dialled = append(dialled, address)
				mu.Unlock()
				if address != net.JoinHostPort(public, "80") {
					t.Errorf("dialled %s: not the checked public address", address)
					return nil, errors.New("must not dial")
				}
				return dialer.DialContext(ctx, network, srv.Listener.Addr().String())
			}})
			client := &http.Client{Transport: &http.Transport{DialContext: g.DialContext, DisableKeepAlives: true}}
			t.Cleanup(client.CloseIdleConnections)

			resp, err := client.Get("http://rebind.example/")
			if err != nil {
				t.Fatalf("first request (public answer): %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "reached" {
				t.Fatalf("first request got %q", body)
			}
			if got := len(res.lookups); got != 1 {
				t.Fatalf("%d lookups for one connection, want 1: the dialled address must be the checked one, not a second answer", got)
			}

			_, err = client.Get("http://rebind.example/")
			var be *ssrf.BlockedError
			if !errors.As(err, &be) || be.Addr != netip.MustParseAddr(private) || be.Host != "rebind.example" {
				t.Fatalf("second request (private answer) = %v, want refused for %s", err, private)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(dialled, []string{net.JoinHostPort(public, "80")}) {
				t.Fatalf("dialled %q, want only the checked public address, by IP", dialled)
			}
		})
	}
}

// The allow list opens exactly the prefixes it lists: not neighbouring
// addresses, not other refused categories, not other encodings (NAT64,
// 6to4, IPv4-compatible) of an allowed address, and it closes nothing.
// Only the IPv4-mapped form of an allowed IPv4 address is the same address.
func TestPolicyAllowOpensExactlyTheListedPrefixes(t *testing.T) {
	tests := []struct {
		allow   []string
		open    []string
		refused []string
	}{
		{
			allow:   nil,
			refused: []string{"10.1.2.3", "127.0.0.1", "169.254.169.254", "::1", "0.0.0.0"},
			open:    []string{"93.184.216.34"},
		},
		{
			allow:   []string{"10.1.2.3/32"},
			open:    []string{"10.1.2.3", "::ffff:10.1.2.3", "93.184.216.34"},
			refused: []string{"10.1.2.2", "10.1.2.4", "10.0.0.1", "64:ff9b::a01:203", "2002:a01:203::1", "::10.1.2.3", "127.0.0.1", "169.254.169.254", "::1"},
		},
		{
			allow:   []string{"127.0.0.0/8"},
			open:    []string{"127.0.0.1", "127.255.255.254", "::ffff:127.0.0.1"},
			refused: []string{"::1", "0.0.0.0", "::", "10.0.0.1", "169.254.169.254", "64:ff9b::7f00:1"},
		},
		{
			allow:   []string{"::1/128"},
			open:    []string{"::1"},
			refused: []string{"127.0.0.1", "::ffff:127.0.0.1", "::", "::2"},
		},
		{
			allow:   []string{"fd00:1::/32"},
			open:    []string{"fd00:1::5", "fd00:1:ffff::1"},
			refused: []string{"fd00:2::1", "fd00:ec2::254", "fc00::1", "fe80::1"},
		},
		{
			allow:   []string{"192.168.0.0/24", "172.16.0.0/16"},
			open:    []string{"192.168.0.7", "172.16.200.1"},
			refused: []string{"192.168.1.7", "172.17.0.1", "10.0.0.1"},
		},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.allow, ","), func(t *testing.T) {
			var allow []netip.Prefix
			for _, p := range tc.allow {
				allow = append(allow, netip.MustParsePrefix(p))
			}
			g := newGuard(t, ssrf.Config{Allow: allow})
			for _, a := range tc.open {
				if err := g.Check(netip.MustParseAddr(a)); err != nil {
					t.Errorf("Check(%s) = %v, want allowed", a, err)
				}
			}
			for _, a := range tc.refused {
				var be *ssrf.BlockedError
				if err := g.Check(netip.MustParseAddr(a)); !errors.As(err, &be) {
					t.Errorf("Check(%s) = %v, want refused", a, err)
				}
			}
		})
	}

	// Through DialContext: of a name's answers, only the allow-listed one
	// is dialled.
	rec := &dialRecorder{}
	res := &fakeResolver{answers: [][]string{{"10.1.2.4", "169.254.169.254", "::ffff:10.1.2.3", "127.0.0.1"}}}
	g := newGuard(t, ssrf.Config{Allow: []netip.Prefix{netip.MustParsePrefix("10.1.2.3/32")}, Resolver: res, Dial: rec.dial})
	conn, err := g.DialContext(t.Context(), "tcp", "onprem.example:8080")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if got := rec.addresses(); !slices.Equal(got, []string{"10.1.2.3:8080"}) {
		t.Fatalf("dialled %q, want only 10.1.2.3:8080", got)
	}
}

// An empty host or a resolver that answers nothing usable never leads to a
// dial: with no name, the dialer itself would pick a local address.
func TestPolicyNoUsableAnswerNoDial(t *testing.T) {
	tests := []struct {
		name    string
		address string
		answers [][]string
	}{
		{"empty host", ":80", nil},
		{"empty answer", "h.example:80", [][]string{{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := &fakeResolver{answers: tc.answers, err: nil}
			if tc.answers == nil {
				res.err = errors.New("no such host")
			}
			g := newGuard(t, ssrf.Config{Resolver: res, Dial: failDial(t)})
			if conn, err := g.DialContext(t.Context(), "tcp", tc.address); err == nil {
				conn.Close()
				t.Fatalf("DialContext(%s) succeeded", tc.address)
			}
		})
	}
	// A resolver returning the zero address gets it refused, not dialled.
	g := newGuard(t, ssrf.Config{Resolver: zeroResolver{}, Dial: failDial(t)})
	_, err := g.DialContext(t.Context(), "tcp", "zero.example:80")
	var be *ssrf.BlockedError
	if !errors.As(err, &be) || be.Reason != "invalid" {
		t.Fatalf("err = %v, want the zero address refused as invalid", err)
	}
}

type zeroResolver struct{}

func (zeroResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{{}}, nil
}
