package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/internal/testkit/testenv"
	"github.com/laneway/laneway/partition"
)

// fakeGroup answers the fence's heartbeats as a coordinator would, and
// can change the membership between the request and its answer.
type fakeGroup struct {
	member string
	gen    int32
	code   int16
	err    error
	sent   []*kmsg.HeartbeatRequest
	during func() // runs while the request is out
}

func (g *fakeGroup) GroupMetadata() (string, int32) { return g.member, g.gen }

func (g *fakeGroup) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	g.sent = append(g.sent, req.(*kmsg.HeartbeatRequest))
	if g.during != nil {
		g.during()
	}
	if g.err != nil {
		return nil, g.err
	}
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.ErrorCode = g.code
	return resp, nil
}

// fenceRig is a fence over a fakeGroup with a clock that moves only when
// told, so that each heartbeat's sending time is known.
type fenceRig struct {
	group *fakeGroup
	lease *partition.Lease
	f     *fence
	now   time.Time
}

func newFenceRig(t *testing.T) *fenceRig {
	t.Helper()
	lease, err := partition.NewLease(partition.LeaseConfig{SessionTimeout: 45 * time.Second, AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := &fenceRig{group: &fakeGroup{member: "m-1", gen: 7}, lease: lease, now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	r.f = newFence("deliveries", lease, time.Second, func() time.Time { return r.now }, testenv.Logger(), nil, func(Event) {})
	r.f.client, r.f.rebalance = r.group, 60*time.Second
	return r
}

func (r *fenceRig) beat(t *testing.T, want heartbeatOutcome) {
	t.Helper()
	if got := r.f.heartbeat(context.Background()); got != want {
		t.Fatalf("heartbeat outcome = %s, want %s", got, want)
	}
}

func TestFenceRenewsFromTheHeartbeatsSending(t *testing.T) {
	r := newFenceRig(t)
	sentAt := r.now
	r.group.during = func() { r.now = r.now.Add(2 * time.Second) } // a slow answer
	r.beat(t, heartbeatRenewed)
	if want := sentAt.Add(r.lease.Length()); !r.lease.Until().Equal(want) {
		t.Fatalf("lease until %v, want %v (from the sending, not the answer)", r.lease.Until(), want)
	}
	hb := r.group.sent[0]
	if hb.Group != "deliveries" || hb.MemberID != "m-1" || hb.Generation != 7 {
		t.Fatalf("heartbeat %+v, want the member's group, id and generation", hb)
	}
}

func TestFenceRenewsNothingWithoutAnAnswer(t *testing.T) {
	r := newFenceRig(t)
	r.group.err = errors.New("coordinator unreachable")
	r.beat(t, heartbeatFailed)
	r.group.err, r.group.member = nil, ""
	r.beat(t, heartbeatNotJoined)
	if !r.lease.Until().IsZero() {
		t.Fatalf("the lease was renewed without an answered heartbeat: until %v", r.lease.Until())
	}
}

// A member the coordinator no longer counts in is fenced at once: its
// lease ends, and nothing starts until it rejoins.
func TestFenceRevokesTheLeaseOfADroppedMember(t *testing.T) {
	for _, code := range []int16{kerr.UnknownMemberID.Code, kerr.IllegalGeneration.Code, kerr.FencedInstanceID.Code} {
		r := newFenceRig(t)
		r.beat(t, heartbeatRenewed)
		r.group.code = code
		r.now = r.now.Add(time.Second)
		r.beat(t, heartbeatFenced)
		if r.lease.Allows(r.now) {
			t.Fatalf("code %d: the lease still allows attempts", code)
		}
	}
}

// An answer about a membership franz-go has already replaced (it rejoined
// while the heartbeat was out) says nothing about the new one.
func TestFenceIgnoresARefusalOfAReplacedMembership(t *testing.T) {
	r := newFenceRig(t)
	r.beat(t, heartbeatRenewed)
	r.group.code = kerr.IllegalGeneration.Code
	r.group.during = func() { r.group.gen = 8 }
	r.beat(t, heartbeatFailed)
	if !r.lease.Allows(r.now) {
		t.Fatal("a refusal of the previous generation revoked the current one's lease")
	}
}

// During a rebalance the member is kept only until the rebalance timeout,
// counted from no earlier than the last confirmed heartbeat's sending.
func TestFenceBoundsTheLeaseByTheRebalanceTimeout(t *testing.T) {
	r := newFenceRig(t)
	r.f.rebalance = 20 * time.Second
	confirmed := r.now
	r.beat(t, heartbeatRenewed)
	r.group.code = kerr.RebalanceInProgress.Code
	r.now = r.now.Add(15 * time.Second)
	r.beat(t, heartbeatRebalancing)
	if want := confirmed.Add(r.lease.Span(20 * time.Second)); !r.lease.Until().Equal(want) {
		t.Fatalf("lease until %v, want the rebalance's bound %v", r.lease.Until(), want)
	}
}
