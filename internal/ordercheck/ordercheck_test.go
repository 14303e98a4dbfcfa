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

	"github.com/laneway/laneway/event"
	"github.com/laneway/laneway/internal/testenv"
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
			if got.Pass() != (tt.want.Lost == 0 && tt.want.OrderViolations == 0 && tt.want.Misrouted == 0 && tt.want.Mismatched == 0) {
				t.Errorf("Pass() = %v", got.Pass())
			}
			if len(got.LostSamples) != min(got.Lost, MaxSamples) || len(got.ViolationSamples) != min(got.OrderViolations, MaxSamples) {
				t.Errorf("samples: %d lost, %d violations", len(got.LostSamples), len(got.ViolationSamples))
			}
		})
	}
}

type counterSet struct {
	Events, Unacked, Expected, Delivered, Dead, Superseded, Lost       int
	Receipts, Duplicates, DuplicatedPairs, Violations, Misrouted, Mism int
	DeadLetters, DeadNoReason, Disorder                                int
}

func counters(r Report) counterSet {
	return counterSet{r.Events, r.Unacked, r.Expected, r.Delivered, r.DeadPairs, r.Superseded, r.Lost,
		r.Receipts, r.Duplicates, r.DuplicatedPairs, r.OrderViolations, r.Misrouted, r.Mismatched,
		r.DeadLetters, r.DeadNoReason, r.OutOfOrderInLog}
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
	backends := []testenv.Backend{testenv.Kfake(t)}
	if b, ok := testenv.RealKafka(); ok {
		backends = append(backends, b)
	}
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
