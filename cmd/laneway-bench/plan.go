package main

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/testkit/benchrecv"
)

// stream is a run of events to a range of endpoints, each endpoint being
// its own tenant: event k goes to endpoint first + k mod endpoints, cycles
// over that endpoint's entities, and each entity's revisions count 1, 2, …
// Everything is arithmetic on k, so a million events cost no memory to
// describe, and a webhook-id alone tells the receiver which delivery it is.
type stream struct {
	base, count      int // the stream's events use slots base … base+count-1
	first, endpoints int
	entities         int     // per endpoint
	rate             float64 // events/s; 0 publishes as fast as Kafka accepts
	// states makes every event a state update (coalesce: true), which a
	// newer revision of its entity may supersede; false publishes facts.
	states bool
}

func (s stream) endpoint(k int) int   { return s.first + k%s.endpoints }
func (s stream) entity(k int) int     { return (k / s.endpoints) % s.entities }
func (s stream) revision(k int) int64 { return int64(k/s.endpoints/s.entities) + 1 }

// plan is a scenario's events: its streams, laid end to end in slot order.
// Streams must not share endpoints, or revisions would repeat.
type plan struct {
	streams []stream
	slots   int
	data    []byte
	// at is each slot's publish time in Unix nanoseconds, for latency; nil
	// when the scenario does not need it (a million int64s would count in
	// the memory a backlog run measures).
	at []int64
}

func newPlan(dataBytes int, keepTimes bool, streams ...stream) *plan {
	p := &plan{data: []byte(`{"pad":"` + strings.Repeat("x", max(dataBytes-10, 0)) + `"}`)}
	for _, s := range streams {
		s.base = p.slots
		p.streams = append(p.streams, s)
		p.slots += s.count
	}
	if keepTimes {
		p.at = make([]int64, p.slots)
	}
	return p
}

// locate returns the stream holding slot and the event's index in it.
func (p *plan) locate(slot int) (stream, int, bool) {
	for _, s := range p.streams {
		if slot >= s.base && slot < s.base+s.count {
			return s, slot - s.base, true
		}
	}
	return stream{}, 0, false
}

// lookup maps a request to endpoint n back to its delivery.
func (p *plan) lookup(n int, msgID string) (benchrecv.Delivery, bool) {
	rest, ok := strings.CutPrefix(msgID, "e")
	slot, err := strconv.Atoi(rest)
	if !ok || err != nil {
		return benchrecv.Delivery{}, false
	}
	s, k, ok := p.locate(slot)
	if !ok || s.endpoint(k) != n {
		return benchrecv.Delivery{}, false
	}
	return benchrecv.Delivery{Slot: slot, Entity: s.entity(k), Revision: s.revision(k)}, true
}

// endpointOf is the endpoint slot's event goes to, or -1.
func (p *plan) endpointOf(slot int) int {
	s, k, ok := p.locate(slot)
	if !ok {
		return -1
	}
	return s.endpoint(k)
}

func planEntityKey(n, entity int) string {
	return "order:" + strconv.Itoa(n) + "-" + strconv.Itoa(entity)
}

// record is the Kafka record of event k of s, occurring at.
func (p *plan) record(s stream, k int, at time.Time) *kgo.Record {
	n, e := s.endpoint(k), s.entity(k)
	key := planEntityKey(n, e)
	value := appendEnvelope(nil, eventID(s.base+k), tenantName(n), key, s.revision(k), s.states, at, p.data)
	return &kgo.Record{Key: []byte(key), Value: value}
}

// publishing is a plan's publication in progress.
type publishing struct {
	start, end time.Time
	acked      atomic.Int64
	mu         sync.Mutex
	err        error
}

func (pb *publishing) done(_ *kgo.Record, err error) {
	if err == nil {
		pb.acked.Add(1)
		return
	}
	pb.mu.Lock()
	pb.err = cmp.Or(pb.err, err)
	pb.mu.Unlock()
}

// publishPlan publishes every stream at its own pace, concurrently, and
// returns once every event is acknowledged or ctx ends.
func publishPlan(ctx context.Context, cl *kgo.Client, p *plan, pb *publishing) error {
	pb.start = time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(p.streams))
	for i, s := range p.streams {
		wg.Go(func() { errs[i] = p.publishStream(ctx, cl, s, pb) })
	}
	wg.Wait()
	flushErr := cl.Flush(ctx)
	pb.end = time.Now()
	pb.mu.Lock()
	defer pb.mu.Unlock()
	for _, err := range append(errs, flushErr, pb.err) {
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	return nil
}

// publishStream produces the stream's events in order. A paced stream
// sends whatever is due, then sleeps until its next event: one timer per
// batch rather than per event keeps the publisher's CPU small.
func (p *plan) publishStream(ctx context.Context, cl *kgo.Client, s stream, pb *publishing) error {
	for k := 0; k < s.count; {
		due := s.count
		if s.rate > 0 {
			due = min(s.count, int(time.Since(pb.start).Seconds()*s.rate)+1)
		}
		for ; k < due; k++ {
			now := time.Now()
			if p.at != nil {
				p.at[s.base+k] = now.UnixNano()
			}
			cl.Produce(ctx, p.record(s, k, now), pb.done)
		}
		if k == s.count {
			break
		}
		next := pb.start.Add(time.Duration(float64(k) / s.rate * float64(time.Second)))
		if !timing.Sleep(ctx, time.Until(next)) {
			return ctx.Err()
		}
	}
	return ctx.Err()
}
