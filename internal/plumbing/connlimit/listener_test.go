package connlimit

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// server accepts on a capped listener and greets every connection it is
// handed with "ok", keeping it open; accepted gets the server's side.
type server struct {
	ln       *Listener
	accepted chan net.Conn
}

func serve(t *testing.T, cfg Config) *server {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Wrap(raw, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, accepted: make(chan net.Conn, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by the test's cleanup
			}
			_, _ = c.Write([]byte("ok"))
			s.accepted <- c
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		close(s.accepted)
		for c := range s.accepted {
			_ = c.Close()
		}
	})
	return s
}

// dial connects from the loopback address from (any 127/8 address is
// this host's) and reports whether the server greeted the connection
// (true) or closed it at once (false).
func (s *server) dial(t *testing.T, from string) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	_, err = io.ReadFull(c, buf)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection from %s neither greeted nor closed", from)
	}
	return err == nil
}

// TestCapsPerAddressAndInAll opens more connections from one address than
// its cap, then from others up to the listener's total: the extras are
// closed at once and counted, a closed connection frees its place, and an
// exempt address (a proxy) is held only to the total.
func TestCapsPerAddressAndInAll(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := serve(t, Config{Limits: Limits{Total: 5, PerAddress: 2}, Name: "door", Registerer: reg,
		Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.9/32")}})
	for i, want := range []bool{true, true, false, false} {
		if got := s.dial(t, "127.0.0.1"); got != want {
			t.Fatalf("connection %d from 127.0.0.1 (cap 2): served %v", i+1, got)
		}
	}
	if !s.dial(t, "127.0.0.2") {
		t.Fatal("another address refused while one is over its cap")
	}
	first := <-s.accepted
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if !s.dial(t, "127.0.0.1") {
		t.Fatal("127.0.0.1 refused after one of its connections closed")
	}
	for range 2 { // two connections from the exempt address
		if !s.dial(t, "127.0.0.9") {
			t.Fatal("the exempt address refused below the total")
		}
	}
	if s.dial(t, "127.0.0.9") || s.dial(t, "127.0.0.3") {
		t.Fatal("a connection over the total (5) served")
	}
	if got := refusals(t, reg); got[ReasonPerAddress] != 2 || got[ReasonTotal] != 2 || len(got) != 2 {
		t.Fatalf("refusals counted %v; want 2 per address, 2 over the total", got)
	}
}

// refusals reads the door's refusals counter from reg, by reason.
func refusals(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "laneway_listener_connections_refused_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["listener"] == "door" {
				out[labels["reason"]] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func TestIPv6ClientsAreCountedPerSlash64(t *testing.T) {
	l := &Listener{cfg: Config{Limits: Limits{Total: 10, PerAddress: 1}}, byAddr: map[netip.Addr]int{}}
	a := l.key(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::1")})
	b := l.key(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff::9")})
	v4 := l.key(&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.1")})
	if a != b || v4 != netip.MustParseAddr("192.0.2.1") {
		t.Fatalf("keys %v %v %v: want one /64 key for both IPv6 addresses, the mapped IPv4 unmapped", a, b, v4)
	}
	if l.admit(a) != "" || l.admit(b) != ReasonPerAddress {
		t.Fatal("a second connection from the same /64 admitted over a cap of 1")
	}
}
