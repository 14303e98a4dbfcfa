package partition

import (
	"strings"
	"testing"
	"time"
)

func newTestLease(t *testing.T, session, attempt time.Duration) *Lease {
	t.Helper()
	l, err := NewLease(LeaseConfig{SessionTimeout: session, AttemptTimeout: attempt})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var leaseT0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func TestLeaseHoldsNothingUntilRenewed(t *testing.T) {
	l := newTestLease(t, 45*time.Second, 5*time.Second)
	if l.Allows(leaseT0) {
		t.Fatal("a lease never renewed allowed an attempt")
	}
}

// The lease runs from the heartbeat's sending, shortened by the drift bound
// and the margin; an attempt starts only if it ends within it.
func TestLeaseAllowsOnlyAttemptsThatEndWithinIt(t *testing.T) {
	l := newTestLease(t, 45*time.Second, 5*time.Second)
	l.Renew(leaseT0)
	want := leaseT0.Add(time.Duration(45*0.99*float64(time.Second)) - DefaultLeaseMargin)
	if got := l.Until(); !got.Equal(want) {
		t.Fatalf("until = %v, want %v", got, want)
	}
	last := want.Add(-5 * time.Second)
	if !l.Allows(last) {
		t.Fatalf("an attempt ending exactly at the lease's end was refused")
	}
	if l.Allows(last.Add(time.Nanosecond)) {
		t.Fatalf("an attempt ending past the lease's end was allowed")
	}
	if r := l.Remaining(last); r != 5*time.Second {
		t.Fatalf("remaining = %v, want 5s", r)
	}
}

// Session expiry at the coordinator counts from the heartbeat's receipt,
// which is after its sending: however slow the local clock within the
// drift bound, the lease ends before the coordinator can give the
// partition away.
func TestLeaseEndsBeforeTheSessionAtTheDriftBound(t *testing.T) {
	const session = 10 * time.Second
	l := newTestLease(t, session, 2*time.Second)
	l.Renew(leaseT0)
	local := l.Until().Sub(leaseT0)
	real := time.Duration(float64(local) / (1 - DefaultLeaseDrift)) // a clock at the slowest bound
	if real >= session {
		t.Fatalf("the lease lasts %v of the coordinator's time, not less than the session timeout %v", real, session)
	}
}

func TestLeaseNeverShrinksOnALateAnswer(t *testing.T) {
	l := newTestLease(t, 45*time.Second, 5*time.Second)
	l.Renew(leaseT0.Add(3 * time.Second))
	until := l.Until()
	l.Renew(leaseT0) // the answer to an earlier heartbeat, arriving late
	if !l.Until().Equal(until) {
		t.Fatalf("a late answer moved the lease from %v to %v", until, l.Until())
	}
}

// A revoke ends the lease at once, and an answer to a heartbeat sent
// before it renews nothing: it speaks of the membership the coordinator
// just denied.
func TestLeaseRevokeEndsItAndOnlyLaterHeartbeatsRenew(t *testing.T) {
	l := newTestLease(t, 45*time.Second, 5*time.Second)
	l.Renew(leaseT0)
	l.Revoke(leaseT0.Add(time.Second))
	if l.Allows(leaseT0.Add(time.Second)) {
		t.Fatal("a revoked lease allowed an attempt")
	}
	l.Renew(leaseT0.Add(500 * time.Millisecond))
	if l.Allows(leaseT0.Add(time.Second)) {
		t.Fatal("a heartbeat sent before the revoke renewed the lease")
	}
	l.Renew(leaseT0.Add(2 * time.Second))
	if !l.Allows(leaseT0.Add(2 * time.Second)) {
		t.Fatal("a heartbeat sent after the revoke did not renew the lease")
	}
}

func TestNilLeaseAllowsEverything(t *testing.T) {
	var l *Lease
	if !l.Allows(leaseT0) || l.Remaining(leaseT0) <= 0 {
		t.Fatal("a nil lease (no group) fenced an attempt")
	}
}

func TestLeaseConfigRefusesASessionTooShortForAnAttempt(t *testing.T) {
	_, err := NewLease(LeaseConfig{SessionTimeout: 5 * time.Second, AttemptTimeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "leaves no room") {
		t.Fatalf("err = %v, want a session timeout too short for an attempt", err)
	}
	min := MinSessionTimeout(5 * time.Second)
	if _, err := NewLease(LeaseConfig{SessionTimeout: min, AttemptTimeout: 5 * time.Second}); err != nil {
		t.Fatalf("MinSessionTimeout %v refused: %v", min, err)
	}
	if _, err := NewLease(LeaseConfig{SessionTimeout: 45 * time.Second, AttemptTimeout: 5 * time.Second, Drift: 0.1, Margin: time.Millisecond}); err == nil {
		t.Fatal("a margin below drift × attempt timeout was accepted")
	}
}

// A rebalance in progress keeps the member only until the rebalance
// timeout: the lease stops there, whatever the session, or an earlier
// renewal, would allow.
func TestLeaseRenewWithinStopsAtTheBound(t *testing.T) {
	l := newTestLease(t, 45*time.Second, 5*time.Second)
	l.Renew(leaseT0)
	bound := leaseT0.Add(10 * time.Second)
	l.RenewWithin(leaseT0.Add(time.Second), bound)
	if !l.Until().Equal(bound) {
		t.Fatalf("until = %v, want the bound %v", l.Until(), bound)
	}
	l.RenewWithin(leaseT0.Add(time.Second), time.Time{})
	if !l.Until().After(bound) {
		t.Fatalf("an unbounded renewal did not go past the earlier bound")
	}
}
