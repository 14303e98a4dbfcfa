package ordercheck

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// Hand-made logs: endpoint A takes every type of tenant t1, B only
// "fact" events of t1, C every type of tenant t2.
var endpoints = []Endpoint{
	{ID: "A", Tenant: "t1"},
	{ID: "B", Tenant: "t1", EventTypes: []string{"fact"}},
	{ID: "C", Tenant: "t2"},
}

// ev is an accepted event of entity "e1" of tenant t1; state events are of
// type "state" and coalesce, facts are of type "fact".
func ev(id string, rev int64, state bool) Accepted {
	typ := "fact"
	if state {
		typ = "state"
	}
	return Accepted{ID: id, Tenant: "t1", Type: typ, Entity: "e1", Revision: rev, Coalesce: state, Offset: rev}
}

func rc(ep, id string, rev int64, seq int64) Receipt {
	return Receipt{Endpoint: ep, EventID: id, Entity: "e1", Revision: rev, Seq: seq}
}

// t0 is the start of the hand-made timelines; at(n) is n seconds later.
var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

// sentAt sets when the producer sent e.
func sentAt(e Accepted, sec int) Accepted {
	e.SentAt = at(sec)
	return e
}

// rcAt is a receipt that arrived at second sec.
func rcAt(ep, id string, rev, seq int64, sec int) Receipt {
	r := rc(ep, id, rev, seq)
	r.At, r.Done, r.Status = at(sec), at(sec), 204
	return r
}

// req is a request in the request log: it arrived at from and ended at to
// (milliseconds after t0) with status (0: no answer).
func req(ep, id string, rev, seq int64, fromMS, toMS, status int) Receipt {
	return Receipt{Endpoint: ep, EventID: id, Entity: "e1", Revision: rev, Seq: seq,
		At: t0.Add(time.Duration(fromMS) * time.Millisecond), Done: t0.Add(time.Duration(toMS) * time.Millisecond), Status: status}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want Report // only the counters below are compared
	}{
		{
			name: "everything delivered in order",
			in: Input{
				Accepted: []Accepted{ev("f1", 1, false), ev("f2", 2, false)},
				Receipts: []Receipt{rc("A", "f1", 1, 1), rc("B", "f1", 1, 2), rc("A", "f2", 2, 3), rc("B", "f2", 2, 4)},
			},
			want: Report{Events: 2, Expected: 4, Delivered: 4, Receipts: 4},
		},
		{
			name: "a fact never delivered to one endpoint is lost",
			in: Input{
				Accepted: []Accepted{ev("f1", 1, false), ev("f2", 2, false)},
				Receipts: []Receipt{rc("A", "f1", 1, 1), rc("B", "f1", 1, 2), rc("A", "f2", 2, 3)},
			},
			want: Report{Events: 2, Expected: 4, Delivered: 3, Lost: 1, Receipts: 3},
		},
		{
			name: "a state event that only endpoint A subscribes to, lost there",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true)},
			},
			want: Report{Events: 1, Expected: 1, Lost: 1},
		},
		{
			name: "dead-lettered with a reason is handled",
			in: Input{
				Accepted: []Accepted{ev("f1", 1, false)},
				Receipts: []Receipt{rc("B", "f1", 1, 1)},
				Dead:     []Dead{{Endpoint: "A", EventID: "f1", Entity: "e1", Revision: 1, Reason: "max_attempts"}},
			},
			want: Report{Events: 1, Expected: 2, Delivered: 1, DeadPairs: 1, Receipts: 1, DeadLetters: 1},
		},
		{
			name: "a dead letter without a reason is not",
			in: Input{
				Accepted: []Accepted{ev("f1", 1, false)},
				Receipts: []Receipt{rc("B", "f1", 1, 1)},
				Dead:     []Dead{{Endpoint: "A", EventID: "f1", Entity: "e1", Revision: 1}},
			},
			want: Report{Events: 1, Expected: 2, Delivered: 1, Lost: 1, Receipts: 1, DeadLetters: 1, DeadNoReason: 1},
		},
		{
			name: "a dead letter for another endpoint does not count",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true)},
				Dead:     []Dead{{Endpoint: "C", EventID: "s1", Entity: "e1", Revision: 1, Reason: "gone"}},
			},
			want: Report{Events: 1, Expected: 1, Lost: 1, DeadLetters: 1},
		},
		{
			name: "state superseded by a later delivered state revision",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true), ev("s2", 2, true), ev("s3", 3, true)},
				Receipts: []Receipt{rc("A", "s3", 3, 1)},
			},
			want: Report{Events: 3, Expected: 3, Delivered: 1, Superseded: 2, Receipts: 1},
		},
		{
			name: "state superseded by a later dead-lettered state revision",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true), ev("s2", 2, true)},
				Dead:     []Dead{{Endpoint: "A", EventID: "s2", Entity: "e1", Revision: 2, Reason: "max_attempts"}},
			},
			want: Report{Events: 2, Expected: 2, DeadPairs: 1, Superseded: 1, DeadLetters: 1},
		},
		{
			name: "a fact is never superseded",
			in: Input{
				Accepted: []Accepted{ev("f1", 1, false), ev("s2", 2, true)},
				Receipts: []Receipt{rc("A", "s2", 2, 1), rc("B", "f1", 1, 2)},
			},
			want: Report{Events: 2, Expected: 3, Delivered: 2, Lost: 1, Receipts: 2},
		},
		{
			name: "a state event is not superseded by a later fact",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true), ev("f2", 2, false)},
				Receipts: []Receipt{rc("A", "f2", 2, 1), rc("B", "f2", 2, 2)},
			},
			want: Report{Events: 2, Expected: 3, Delivered: 2, Lost: 1, Receipts: 2},
		},
		{
			name: "a state event is not superseded by an older one, nor by one delivered elsewhere",
			in: Input{
				Accepted: []Accepted{
					ev("s1", 1, true), ev("s2", 2, true),
					{ID: "x3", Tenant: "t2", Type: "state", Entity: "e1", Revision: 3, Coalesce: true, Offset: 3},
				},
				Receipts: []Receipt{rc("A", "s1", 1, 1), rc("C", "x3", 3, 2)},
			},
			want: Report{Events: 3, Expected: 3, Delivered: 2, Lost: 1, Receipts: 2},
		},
		{
			name: "order violation: revision 2 first delivered after revision 3",
			in: Input{
				Accepted: []Accepted{ev("f1", 1, false), ev("f2", 2, false), ev("f3", 3, false)},
				Receipts: []Receipt{
					rc("A", "f1", 1, 1), rc("A", "f3", 3, 2), rc("A", "f2", 2, 3),
					rc("B", "f1", 1, 4), rc("B", "f2", 2, 5), rc("B", "f3", 3, 6),
				},
			},
			want: Report{Events: 3, Expected: 6, Delivered: 6, Receipts: 6, OrderViolations: 1},
		},
		{
			name: "order is by receipt sequence, not by log position",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true), ev("s2", 2, true)},
				Receipts: []Receipt{rc("A", "s2", 2, 8), rc("A", "s1", 1, 7)},
			},
			want: Report{Events: 2, Expected: 2, Delivered: 2, Receipts: 2},
		},
		{
			name: "order is per endpoint: another endpoint's progress does not count",
			in: Input{
				Accepted: []Accepted{ev("f1", 1, false), ev("f2", 2, false)},
				Receipts: []Receipt{rc("A", "f2", 2, 1), rc("B", "f1", 1, 2), rc("B", "f2", 2, 3), rc("A", "f1", 1, 4)},
			},
			want: Report{Events: 2, Expected: 4, Delivered: 4, Receipts: 4, OrderViolations: 1},
		},
		{
			name: "replays after a crash are duplicates, not violations",
			in: Input{
				Accepted: []Accepted{ev("f1", 1, false), ev("f2", 2, false), ev("f3", 3, false)},
				Receipts: []Receipt{
					rc("A", "f1", 1, 1), rc("A", "f2", 2, 2), rc("A", "f3", 3, 3),
					rc("A", "f2", 2, 4), rc("A", "f3", 3, 5), rc("A", "f3", 3, 6),
					rc("B", "f1", 1, 7), rc("B", "f2", 2, 8), rc("B", "f3", 3, 9),
				},
			},
			want: Report{Events: 3, Expected: 6, Delivered: 6, Receipts: 9, Duplicates: 3, DuplicatedPairs: 2},
		},
		{
			name: "a skipped state revision delivered later is a violation",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true), ev("s2", 2, true), ev("s3", 3, true)},
				Receipts: []Receipt{rc("A", "s1", 1, 1), rc("A", "s3", 3, 2), rc("A", "s2", 2, 3)},
			},
			want: Report{Events: 3, Expected: 3, Delivered: 3, Receipts: 3, OrderViolations: 1},
		},
		{
			name: "delivered to an endpoint not subscribed, or unknown, or with the wrong revision",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true)},
				Receipts: []Receipt{rc("A", "s1", 7, 1), rc("B", "s1", 1, 2), rc("A", "zz", 9, 3)},
			},
			want: Report{Events: 1, Expected: 1, Delivered: 1, Receipts: 3, Misrouted: 2, Mismatched: 1},
		},
		// Every revision counts, not only an entity's last.
		{
			name: "states: r1 and r2 never delivered, r3 delivered: both superseded",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true), ev("s2", 2, true), ev("s3", 3, true)},
				Receipts: []Receipt{rc("A", "s3", 3, 1)},
			},
			want: Report{Events: 3, Expected: 3, Delivered: 1, Superseded: 2, Receipts: 1},
		},
		{
			name: "states: r1 delivered, r2 and r3 neither delivered nor dead: both lost",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true), ev("s2", 2, true), ev("s3", 3, true)},
				Receipts: []Receipt{rc("A", "s1", 1, 1)},
			},
			want: Report{Events: 3, Expected: 3, Delivered: 1, Lost: 2, Receipts: 1},
		},
		{
			name: "a fact lost between delivered facts is lost",
			in: Input{
				Accepted: []Accepted{ev("f1", 1, false), ev("f2", 2, false), ev("f3", 3, false)},
				Receipts: []Receipt{
					rc("A", "f1", 1, 1), rc("A", "f3", 3, 2),
					rc("B", "f1", 1, 3), rc("B", "f2", 2, 4), rc("B", "f3", 3, 5),
				},
			},
			want: Report{Events: 3, Expected: 6, Delivered: 5, Lost: 1, Receipts: 5},
		},
		{
			name: "a state superseded by one superseded in turn by a delivered one is handled",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true), ev("s2", 2, true), ev("s3", 3, true), ev("s4", 4, true)},
				Receipts: []Receipt{rc("A", "s1", 1, 1), rc("A", "s4", 4, 2)},
			},
			want: Report{Events: 4, Expected: 4, Delivered: 2, Superseded: 2, Receipts: 2},
		},
		{
			name: "a state first delivered after a newer one is a violation",
			in: Input{
				Accepted: []Accepted{ev("s3", 3, true), ev("s4", 4, true)},
				Receipts: []Receipt{rc("A", "s4", 4, 1), rc("A", "s3", 3, 2)},
			},
			want: Report{Events: 2, Expected: 2, Delivered: 2, Receipts: 2, OrderViolations: 1},
		},
		{
			name: "a replay of a delivered state after a newer one is a duplicate only",
			in: Input{
				Accepted: []Accepted{ev("s3", 3, true), ev("s4", 4, true)},
				Receipts: []Receipt{rc("A", "s3", 3, 1), rc("A", "s4", 4, 2), rc("A", "s3", 3, 3)},
			},
			want: Report{Events: 2, Expected: 2, Delivered: 2, Receipts: 3, Duplicates: 1, DuplicatedPairs: 1},
		},
		// A newer state supersedes an older one only if it existed before
		// an event between them started (the older must have finished by
		// then).
		{
			name: "a state is not superseded by a newer one sent after a fact between them started",
			in: Input{
				Accepted: []Accepted{sentAt(ev("s1", 1, true), 0), sentAt(ev("f2", 2, false), 1), sentAt(ev("s3", 3, true), 20)},
				Receipts: []Receipt{rcAt("A", "f2", 2, 1, 10), rcAt("B", "f2", 2, 2, 10), rcAt("A", "s3", 3, 3, 21)},
			},
			want: Report{Events: 3, Expected: 4, Delivered: 3, Lost: 1, Receipts: 3},
		},
		{
			name: "a state is superseded by a newer one that existed before the fact between them started",
			in: Input{
				Accepted: []Accepted{sentAt(ev("s1", 1, true), 0), sentAt(ev("f2", 2, false), 1), sentAt(ev("s3", 3, true), 5)},
				Receipts: []Receipt{rcAt("A", "f2", 2, 1, 10), rcAt("B", "f2", 2, 2, 10), rcAt("A", "s3", 3, 3, 21)},
			},
			want: Report{Events: 3, Expected: 4, Delivered: 3, Superseded: 1, Receipts: 3},
		},
		{
			name: "supersession through a chain: the link after the fact came too late, both states lost",
			in: Input{
				Accepted: []Accepted{sentAt(ev("s1", 1, true), 0), sentAt(ev("s2", 2, true), 1),
					sentAt(ev("f3", 3, false), 2), sentAt(ev("s4", 4, true), 20)},
				Receipts: []Receipt{rcAt("A", "f3", 3, 1, 10), rcAt("B", "f3", 3, 2, 10), rcAt("A", "s4", 4, 3, 21)},
			},
			want: Report{Events: 4, Expected: 5, Delivered: 3, Lost: 2, Receipts: 3},
		},
		{
			name: "a delivered state between them may supersede on its own",
			in: Input{
				Accepted: []Accepted{sentAt(ev("s1", 1, true), 0), sentAt(ev("s2", 2, true), 1),
					sentAt(ev("f3", 3, false), 2), sentAt(ev("s4", 4, true), 20)},
				Receipts: []Receipt{rcAt("A", "s2", 2, 1, 5), rcAt("A", "f3", 3, 2, 10), rcAt("B", "f3", 3, 3, 10), rcAt("A", "s4", 4, 4, 21)},
			},
			want: Report{Events: 4, Expected: 5, Delivered: 4, Superseded: 1, Receipts: 4},
		},
		{
			name: "without send times a newer handled state supersedes across facts",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true), ev("f2", 2, false), ev("s3", 3, true)},
				Receipts: []Receipt{rcAt("A", "f2", 2, 1, 10), rcAt("B", "f2", 2, 2, 10), rcAt("A", "s3", 3, 3, 21)},
			},
			want: Report{Events: 3, Expected: 4, Delivered: 3, Superseded: 1, Receipts: 3},
		},
		{
			name: "an event's start is its first request, answered or not",
			in: Input{
				Accepted: []Accepted{sentAt(ev("s1", 1, true), 0), sentAt(ev("f2", 2, false), 1), sentAt(ev("s3", 3, true), 20)},
				// f2 failed at 10 s and was delivered at 30 s, after s3 was sent.
				Receipts: []Receipt{rcAt("B", "f2", 2, 1, 10), rcAt("A", "f2", 2, 3, 30), rcAt("A", "s3", 3, 4, 31)},
				Requests: []Receipt{
					req("B", "f2", 2, 1, 10000, 10000, 204), req("A", "f2", 2, 2, 10000, 10001, 503),
					req("A", "f2", 2, 3, 30000, 30000, 204), req("A", "s3", 3, 4, 31000, 31000, 204),
				},
			},
			want: Report{Events: 3, Expected: 4, Delivered: 3, Lost: 1, Receipts: 3, Requests: 4},
		},
		// Two requests of one (endpoint, entity) in flight at once.
		{
			name: "a request arriving while one of its entity is in flight overlaps",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true), ev("s2", 2, true)},
				Receipts: []Receipt{rc("A", "s1", 1, 1), rc("A", "s2", 2, 2)},
				Requests: []Receipt{req("A", "s1", 1, 1, 0, 20000, 204), req("A", "s2", 2, 2, 10000, 10010, 204)},
			},
			want: Report{Events: 2, Expected: 2, Delivered: 2, Receipts: 2, Requests: 2, Overlaps: 1},
		},
		{
			name: "a retry of the same event while the first attempt is in flight overlaps too",
			in: Input{
				Accepted: []Accepted{ev("f1", 1, false)},
				Receipts: []Receipt{rc("A", "f1", 1, 2), rc("B", "f1", 1, 3)},
				Requests: []Receipt{req("A", "f1", 1, 1, 0, 5000, 0), req("A", "f1", 1, 2, 3000, 3010, 204), req("B", "f1", 1, 3, 3000, 3010, 204)},
			},
			want: Report{Events: 1, Expected: 2, Delivered: 2, Receipts: 2, Requests: 3, Overlaps: 1},
		},
		{
			name: "requests one after the other, an abandoned one noticed late, and other entities do not overlap",
			in: Input{
				Accepted: []Accepted{ev("s1", 1, true), ev("s2", 2, true),
					{ID: "x1", Tenant: "t1", Type: "state", Entity: "e2", Revision: 1, Coalesce: true, Offset: 9}},
				Receipts: []Receipt{rc("A", "s1", 1, 2), rc("A", "s2", 2, 3), {Endpoint: "A", EventID: "x1", Entity: "e2", Revision: 1, Seq: 4}},
				Requests: []Receipt{
					req("A", "s1", 1, 1, 0, 2000, 0),      // the sender gave up; the receiver saw it at 2 s
					req("A", "s1", 1, 2, 1990, 2500, 204), // retried within the grace
					req("A", "s2", 2, 3, 2500, 3000, 204), // right after
					{Endpoint: "A", EventID: "x1", Entity: "e2", Revision: 1, Seq: 4, At: t0, Done: at(5), Status: 204},
				},
			},
			want: Report{Events: 3, Expected: 3, Delivered: 3, Receipts: 3, Requests: 4},
		},
		{
			name: "publishes with an unknown outcome are neither lost nor misrouted",
			in: Input{
				Accepted: []Accepted{ev("f1", 1, false), {ID: "u2", Tenant: "t1", Type: "fact", Entity: "e1", Revision: 2, Err: "timeout"}},
				Receipts: []Receipt{rc("A", "f1", 1, 1), rc("B", "f1", 1, 2), rc("A", "u2", 2, 3)},
			},
			want: Report{Events: 1, Unacked: 1, Expected: 2, Delivered: 2, Receipts: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Endpoints = endpoints
			got := Check(tt.in)
			g := counters(got)
			if w := counters(tt.want); g != w {
				t.Errorf("got  %+v\nwant %+v\nsamples: %q %q %q", g, w, got.LostSamples, got.ViolationSamples, got.OtherSamples)
			}
			if got.Pass() != (tt.want.Lost == 0 && tt.want.OrderViolations == 0 && tt.want.Overlaps == 0 && tt.want.Misrouted == 0 && tt.want.Mismatched == 0) {
				t.Errorf("Pass() = %v", got.Pass())
			}
			if len(got.LostSamples) != min(got.Lost, MaxSamples) || len(got.ViolationSamples) != min(got.OrderViolations, MaxSamples) ||
				len(got.OverlapSamples) != min(got.Overlaps, MaxSamples) {
				t.Errorf("samples: %d lost, %d violations, %d overlaps", len(got.LostSamples), len(got.ViolationSamples), len(got.OverlapSamples))
			}
		})
	}
}

type counterSet struct {
	Events, Unacked, Expected, Delivered, Dead, Superseded, Lost       int
	Receipts, Duplicates, DuplicatedPairs, Violations, Misrouted, Mism int
	DeadLetters, DeadNoReason, Disorder, Requests, Overlaps            int
}

func counters(r Report) counterSet {
	return counterSet{r.Events, r.Unacked, r.Expected, r.Delivered, r.DeadPairs, r.Superseded, r.Lost,
		r.Receipts, r.Duplicates, r.DuplicatedPairs, r.OrderViolations, r.Misrouted, r.Mismatched,
		r.DeadLetters, r.DeadNoReason, r.OutOfOrderInLog, r.Requests, r.Overlaps}
}

func TestLostSampleNamesTheEvent(t *testing.T) {
	rep := Check(Input{Endpoints: endpoints, Accepted: []Accepted{ev("f9", 9, false)}, Receipts: []Receipt{rc("A", "f9", 9, 1)}})
	if rep.Lost != 1 || !strings.Contains(rep.LostSamples[0], "f9") || !strings.Contains(rep.LostSamples[0], "endpoint B") {
		t.Fatalf("lost %d, samples %q", rep.Lost, rep.LostSamples)
	}
	if rep.PerEndpoint["B"].Lost != 1 || rep.PerEndpoint["A"].Delivered != 1 {
		t.Fatalf("per endpoint: %+v %+v", rep.PerEndpoint["A"], rep.PerEndpoint["B"])
	}
}

// TestLostSampleSaysWhyNotSuperseded: a state lost behind a fact names the
// newer handled state that came too late to supersede it.
func TestLostSampleSaysWhyNotSuperseded(t *testing.T) {
	rep := Check(Input{Endpoints: endpoints,
		Accepted: []Accepted{sentAt(ev("s1", 1, true), 0), sentAt(ev("f2", 2, false), 1), sentAt(ev("s3", 3, true), 20)},
		Receipts: []Receipt{rcAt("A", "f2", 2, 1, 10), rcAt("B", "f2", 2, 2, 10), rcAt("A", "s3", 3, 3, 21)},
	})
	if rep.Lost != 1 || !strings.Contains(rep.LostSamples[0], "s1") || !strings.Contains(rep.LostSamples[0], "newer state rev 3") ||
		!strings.Contains(rep.LostSamples[0], "after rev 2 had started") {
		t.Fatalf("lost %d, samples %q", rep.Lost, rep.LostSamples)
	}
}

// TestOverlapSample names both requests and fails the verdict.
func TestOverlapSample(t *testing.T) {
	rep := Check(Input{Endpoints: endpoints,
		Accepted: []Accepted{ev("s1", 1, true), ev("s2", 2, true)},
		Receipts: []Receipt{rc("A", "s1", 1, 1), rc("A", "s2", 2, 2)},
		Requests: []Receipt{req("A", "s1", 1, 1, 0, 20000, 204), req("A", "s2", 2, 2, 10000, 10010, 204)},
	})
	if rep.Pass() || rep.Overlaps != 1 || rep.PerEndpoint["A"].Overlaps != 1 ||
		!strings.Contains(rep.OverlapSamples[0], "rev 2 (event s2)") || !strings.Contains(rep.OverlapSamples[0], "while rev 1 (event s1") {
		t.Fatalf("pass %t, overlaps %d, samples %q", rep.Pass(), rep.Overlaps, rep.OverlapSamples)
	}
}

func TestAcceptedDisorder(t *testing.T) {
	in := Input{Endpoints: endpoints, Accepted: []Accepted{ev("f1", 1, false), ev("f2", 2, false)}}
	in.Accepted[1].Offset = 0 // revision 2 before revision 1 in the partition
	in.Accepted[0].Offset = 5
	if rep := Check(in); rep.OutOfOrderInLog != 1 {
		t.Fatalf("accepted disorder %d, want 1", rep.OutOfOrderInLog)
	}
}

func TestReadNDJSON(t *testing.T) {
	got, err := ReadNDJSON[Receipt](strings.NewReader(`{"ep":"A","id":"f1","entity":"e1","rev":1,"seq":1}

{"ep":"B","id":"f1","entity":"e1","rev":1,"seq":2}
`))
	if err != nil || len(got) != 2 || got[1].Endpoint != "B" {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := ReadNDJSON[Receipt](strings.NewReader(`{"ep":"A"}` + "\n" + `{"ep":`)); err == nil {
		t.Fatal("a torn line was accepted")
	}
}

// TestReadDeadTopic writes dead letters as Laneway does (some in an aborted
// transaction, which must not count) and reads them back.
func TestReadDeadTopic(t *testing.T) {
	backends := testenv.Kafkas(t)
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			topic := testenv.Unique("dead")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.DefaultProduceTopic(topic))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, -1, nil, topic); err != nil {
				t.Fatal(err)
			}
			letter := func(i int) *kgo.Record {
				v, _ := json.Marshal(event.DeadLetter{ID: fmt.Sprint(i), Reason: event.ReasonMaxAttempts, EndpointID: "A",
					Delivery: &event.Delivery{EventID: fmt.Sprintf("f%d", i), EndpointID: "A", Entity: "e1", Revision: int64(i)}})
				return &kgo.Record{Key: []byte("A"), Value: v}
			}
			var recs []*kgo.Record
			for i := range 50 {
				recs = append(recs, letter(i))
			}
			invalid, _ := json.Marshal(event.DeadLetter{ID: "x", Reason: event.ReasonInvalidEvent, Raw: []byte("{")})
			recs = append(recs, &kgo.Record{Key: []byte("x"), Value: invalid})
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			txn, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.DefaultProduceTopic(topic),
				kgo.TransactionalID(testenv.Unique("dead-txn")))
			if err != nil {
				t.Fatal(err)
			}
			defer txn.Close()
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := txn.ProduceSync(ctx, letter(99)).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
				t.Fatal(err)
			}
			got, err := ReadDeadTopic(ctx, cl, topic)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 50 {
				t.Fatalf("read %d dead letters of deliveries, want 50", len(got))
			}
			for _, d := range got {
				if d.Endpoint != "A" || d.Reason != event.ReasonMaxAttempts || d.EventID == "f99" {
					t.Fatalf("unexpected %+v", d)
				}
			}
		})
	}
}
