package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/hooklog"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// eventLog collects a stage's events (DeliveryConfig.OnEvent, or
// FanoutConfig.OnEvent) for tests that wait on what the stage did instead
// of polling its metrics.
type eventLog struct{ *hooklog.Log[Event] }

func newEventLog() eventLog { return eventLog{hooklog.New[Event]()} }

// The stage tells its OnEvent hook about assignments, commits, parking and
// releases, in that order for one partition and lane.
func TestStageEvents(t *testing.T) {
	r := kfakeStageRig(t, 1)
	rc, release := heldReceiver(t)
	ep := testEndpoint("ep_1", rc.URL("/1"))
	ep.Paused = true
	events := newEventLog()
	s := r.startStage(stageOpts{endpoints: newFakeEndpoints(ep), breakers: newFakeBreakers(), tweak: func(c *DeliveryConfig) {
		c.OnEvent = events.Add
	}})
	t.Cleanup(release)
	events.Wait(t, time.Minute, "partition 0 assigned", func(e Event) bool { return e.Kind == EventAssigned && e.Partition == 0 })
	r.produce(0, testDelivery("ev1", "ep_1", "e1", 1))
	parked := events.Wait(t, time.Minute, "the paused endpoint's lane parked", func(e Event) bool { return e.Kind == EventLaneParked })
	if parked.Endpoint != "ep_1" || parked.Reason != "paused" || parked.Partition != 0 {
		t.Fatalf("parked event %+v", parked)
	}
	events.Wait(t, time.Minute, "the watermark past the parked delivery committed", func(e Event) bool {
		return e.Kind == EventCommitted && e.Offset >= 1
	})
	s.stop()
	events.Wait(t, time.Minute, "partition 0 released", func(e Event) bool { return e.Kind == EventReleased && e.Partition == 0 })
}

// waitAttempts waits until n attempts to any endpoint ended with outcome.
func (l eventLog) waitAttempts(t *testing.T, within time.Duration, outcome string, n int) {
	t.Helper()
	got := 0
	l.Wait(t, within, fmt.Sprintf("%d attempts ending %s", n, outcome), func(e Event) bool {
		if e.Kind == EventAttempt && e.Reason == outcome {
			got++
		}
		return got >= n
	})
}

// The delivery stage tells its hook when an outcome opens or closes an
// endpoint's breaker: a streak reaching the threshold opens it, a failed
// probe opens it again, a success or a reset closes it; outcomes that
// change nothing, and a probe starting, tell nothing.
func TestBreakerEvents(t *testing.T) {
	events := newEventLog()
	s := &DeliveryStage{cfg: DeliveryConfig{Breakers: newStateBreakers(breaker.Config{Threshold: 2, FirstPause: time.Minute}), OnEvent: events.Add}}
	b := s.breakersFor(3)
	now := time.Now()
	b.Record("ep", false, now)
	b.Record("ep", false, now) // the threshold: opens
	b.Record("ep", false, now) // while open: nothing
	if d := b.Allow("ep", now.Add(2*time.Minute), 1, 0); !d.Probe {
		t.Fatalf("Allow after the pause = %+v, want a probe", d)
	}
	b.Record("ep", false, now.Add(2*time.Minute)) // the probe failed: opens again
	b.Record("ep", true, now.Add(3*time.Minute))  // a success: closes
	b.Record("ep", true, now.Add(3*time.Minute))  // closed already: nothing
	b.Record("ep", false, now.Add(4*time.Minute))
	b.Record("ep", false, now.Add(4*time.Minute)) // opens
	b.Reset("ep")                                 // re-enabled: closes
	b.Reset("ep")                                 // closed already: nothing

	var got []string
	for _, e := range events.All() {
		if e.Partition != 3 || e.Endpoint != "ep" {
			t.Errorf("event %+v, want partition 3 and endpoint ep", e)
		}
		got = append(got, string(e.Kind))
	}
	want := []string{"breaker_opened", "breaker_opened", "breaker_closed", "breaker_opened", "breaker_closed"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}

	s.cfg.OnEvent = nil
	if _, wrapped := s.breakersFor(3).(eventBreakers); wrapped {
		t.Fatal("without a hook the owner's breakers are wrapped all the same")
	}
}

// stateBreakers keeps breakers in a map with package breaker's
// transitions, as breaker.Cache does without Redis.
type stateBreakers struct {
	cfg breaker.Config
	m   map[string]breaker.Breaker
}

func newStateBreakers(cfg breaker.Config) *stateBreakers {
	return &stateBreakers{cfg: cfg, m: map[string]breaker.Breaker{}}
}

func (b *stateBreakers) Allow(id string, now time.Time, maxConcurrency, inFlight int) breaker.Decision {
	var d breaker.Decision
	b.m[id], d = breaker.Allow(b.m[id], now, maxConcurrency, inFlight)
	return d
}

func (b *stateBreakers) Record(id string, success bool, now time.Time) breaker.Breaker {
	b.m[id] = breaker.Record(b.m[id], success, now, b.cfg)
	return b.m[id]
}

func (b *stateBreakers) Get(id string) breaker.Breaker        { return b.m[id] }
func (b *stateBreakers) Loaded(id string) bool                { _, ok := b.m[id]; return ok }
func (b *stateBreakers) Reset(id string)                      { b.m[id] = breaker.Breaker{} }
func (b *stateBreakers) Warm(context.Context, []string) error { return nil }
func (b *stateBreakers) Flush(context.Context) error          { return nil }
func (b *stateBreakers) Forget(ids ...string) {
	for _, id := range ids {
		delete(b.m, id)
	}
}

// The fan-out tells its hook, for each committed transaction, how many
// deliveries it wrote to each deliveries partition and the offset after
// the last; an invalid event's dead letter is not a delivery.
func TestFanoutEvents(t *testing.T) {
	r := kfakeStageRig(t, 2)
	events := r.startFanout(t, fixedSubscribers{"ep_1", "ep_2", "ep_3"})

	// The invalid event first: its dead letter is committed before the
	// last delivery.
	recs := []*kgo.Record{{Topic: r.tops.Events, Partition: 0, Value: []byte("not an event")}}
	const n = 20
	for i := range n {
		v, err := json.Marshal(event.Envelope{ID: fmt.Sprint("evt-", i), Type: "order.updated", Tenant: "acme",
			Entity: fmt.Sprint("order:", i), Revision: 1, OccurredAt: time.Now().UTC(), Data: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: r.tops.Events, Partition: int32(i % 2), Value: v})
	}
	if err := r.cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	written := 0
	events.Wait(t, time.Minute, fmt.Sprintf("%d deliveries fanned out", 3*n), func(e Event) bool {
		if e.Kind == EventFannedOut {
			written += e.Count
		}
		return written >= 3*n
	})
	if written != 3*n {
		t.Fatalf("the events counted %d deliveries, want %d", written, 3*n)
	}
	told := map[int32]int64{}
	for _, e := range events.All() {
		told[e.Partition] = max(told[e.Partition], e.Offset)
	}
	if ends := r.recordEnds(t, r.tops.Deliveries, 3*n); !maps.Equal(told, ends) {
		t.Fatalf("the events say the deliveries partitions end at %v, their last records end at %v", told, ends)
	}
}

// A record on the events topic whose id holds CR/LF is dead-lettered at
// once as invalid_event: fanned out, each of its deliveries would fail every
// attempt inside Laneway and hold its entity for up to 72 h (#27). The
// entity's next event is fanned out as usual.
func TestFanoutDeadLettersControlCharacterIDs(t *testing.T) {
	r := kfakeStageRig(t, 1)
	events := r.startFanout(t, fixedSubscribers{"ep_1"})

	var values [][]byte
	for _, id := range []string{"evt-1\r\nX-Injected: 1", "evt-2"} {
		v, err := json.Marshal(event.Envelope{ID: id, Type: "order.updated", Tenant: "acme", Entity: "order:1",
			OccurredAt: time.Now().UTC(), Data: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, v)
	}
	// One produce, in order: the poisoned event's fate is decided by the
	// time its successor's delivery is written.
	if err := r.cl.ProduceSync(t.Context(), &kgo.Record{Topic: r.tops.Events, Key: []byte("order:1"), Value: values[0]},
		&kgo.Record{Topic: r.tops.Events, Key: []byte("order:1"), Value: values[1]}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	events.Wait(t, time.Minute, "evt-2 fanned out", func(e Event) bool { return e.Kind == EventFannedOut })

	// The entity's first delivery, had the poisoned event been fanned out,
	// would come before evt-2's.
	first := r.committedRecords(t, r.tops.Deliveries, 1)[0]
	if d, err := event.ParseDelivery(first.Value); err != nil || d.EventID != "evt-2" {
		t.Errorf("first delivery %q, want evt-2's", first.Value)
	}
	dls := r.deadLetters()
	if len(dls) != 1 || dls[0].Reason != event.ReasonInvalidEvent || string(dls[0].Raw) != string(values[0]) ||
		!strings.Contains(dls[0].Detail, "id holds a control character") {
		t.Fatalf("dead letters %+v, want one invalid_event letter of the poisoned record, naming the control character", dls)
	}
}

// startFanout runs a fan-out stage on the rig's topics for the test and
// returns its events.
func (r *stageRig) startFanout(t *testing.T, subscribers SubscriberIndex) eventLog {
	t.Helper()
	events := newEventLog()
	f, err := NewFanout(FanoutConfig{
		Brokers: r.brokers, Topics: r.tops, Group: r.group + "-fanout", TransactionalID: r.group + "-fanout",
		Subscribers: subscribers, OnEvent: events.Add, Logger: testenv.Logger(),
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Stop(context.Background()) })
	return events
}

// recordEnds reads the first n committed records of topic and returns, per
// partition, the offset after its last.
func (r *stageRig) recordEnds(t *testing.T, topic string, n int) map[int32]int64 {
	t.Helper()
	ends := map[int32]int64{}
	for _, rec := range r.committedRecords(t, topic, n) {
		ends[rec.Partition] = rec.Offset + 1
	}
	return ends
}

// committedRecords reads the first n committed records of topic.
func (r *stageRig) committedRecords(t *testing.T, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s: %v", len(out), n, topic, ctx.Err())
		}
		fs.EachRecord(func(rec *kgo.Record) { out = append(out, rec) })
	}
	return out
}

// fixedSubscribers subscribes its endpoints to every event.
type fixedSubscribers []string

func (s fixedSubscribers) Subscribers(dst []string, _, _ string) []string { return append(dst, s...) }
