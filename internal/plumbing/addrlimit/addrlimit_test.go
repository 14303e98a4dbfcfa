package addrlimit

import (
	"net/http"
	"net/netip"
	"testing"
	"time"
)

func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		remote, xff, want string
	}{
		{"203.0.113.5:4000", "", "203.0.113.5"},
		{"203.0.113.5:4000", "198.51.100.1", "203.0.113.5"},         // an untrusted peer's header is ignored
		{"10.1.2.3:4000", "198.51.100.1, 10.9.9.9", "198.51.100.1"}, // through two proxies
		{"10.1.2.3:4000", "6.6.6.6, 198.51.100.1", "198.51.100.1"},  // a sender's own XFF entry is not believed
		{"10.1.2.3:4000", "10.0.0.1", "10.1.2.3"},                   // all trusted: the peer
		{"10.1.2.3:4000", "garbage", "10.1.2.3"},                    // a garbled chain: the peer
		{"[::ffff:203.0.113.9]:1", "", "203.0.113.9"},               // mapped IPv4 is IPv4
		{"[2001:db8::1]:1", "", "2001:db8::1"},
	} {
		r := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := ClientAddr(r, trusted); got.String() != tc.want {
			t.Errorf("%s via %q: %s, want %s", tc.remote, tc.xff, got, tc.want)
		}
	}
	a, b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::ffff:1")
	if Key(a) != Key(b) {
		t.Errorf("one IPv6 /64 is two buckets: %s %s", Key(a), Key(b))
	}
}

// clock is a settable time.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func addr(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}) }

// Past the address bound new addresses share one bucket, and addresses
// whose bucket refilled are forgotten.
func TestAddressBucketsAreBounded(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	l := New(1, 1, 2, c.Now)
	for i := range 2 {
		if ok, _ := l.Allow(addr(i)); !ok {
			t.Fatalf("address %d refused", i)
		}
	}
	if ok, _ := l.Allow(addr(2)); !ok {
		t.Fatal("the first overflow address was refused: the shared bucket starts full")
	}
	if ok, _ := l.Allow(addr(3)); ok {
		t.Fatal("a second overflow address had its own bucket")
	}
	if n := l.Tracked(); n != 2 {
		t.Fatalf("%d addresses tracked, want at most 2", n)
	}
	c.now = c.now.Add(2 * time.Second) // every bucket refills: the sweep forgets them
	if ok, _ := l.Allow(addr(4)); !ok || l.Tracked() != 1 {
		t.Fatalf("after the refill: allowed %v, %d tracked, want a fresh bucket and 1 tracked", ok, l.Tracked())
	}
}

// Wait takes nothing; Charge takes a token, so that only what is charged
// (failures) counts against an address.
func TestWaitAndCharge(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	l := New(0.5, 2, 10, c.Now)
	for range 5 {
		if d := l.Wait(addr(1)); d != 0 {
			t.Fatalf("Wait spent a token: %v to wait", d)
		}
	}
	l.Charge(addr(1))
	l.Charge(addr(1))
	if d := l.Wait(addr(1)); d != 2*time.Second {
		t.Fatalf("after 2 charges of a burst of 2: wait %v, want 2s", d)
	}
	if d := l.Wait(addr(2)); d != 0 {
		t.Fatalf("another address waits %v", d)
	}
	c.now = c.now.Add(2 * time.Second)
	if d := l.Wait(addr(1)); d != 0 {
		t.Fatalf("after the refill: wait %v", d)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, 1500 * time.Millisecond: 2, 3 * time.Second: 3} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}
