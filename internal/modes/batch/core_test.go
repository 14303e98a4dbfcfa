package batch

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/event"
)

// simRun drives a Core through one seeded run: events arrive in the feed
// over time, a receiver answers each batch (2xx, 5xx, 413 for a body above
// its limit, now and then 410 is left out: the endpoint stays enabled),
// and the oracle checks the batch contract after every step.
type simRun struct {
	t      *testing.T
	rng    *rand.Rand
	core   *Core
	limits Limits
	now    time.Time

	feed      []Event // everything appended, by offset
	finished  map[int64]string
	delivered []int64 // offsets in the order the receiver first took them
	lastBatch []int64 // the batch that failed last, to check it is retried whole
	limit     int     // the receiver's body limit (413 above it)
	failing   bool
	paused    bool // the endpoint is paused: nothing is sent, old events expire
	maxAge    time.Duration
}

func TestCoreSimulation(t *testing.T) {
	for seed := uint64(1); seed <= 3000; seed++ {
		runSeed(t, seed)
		if t.Failed() {
			t.Fatalf("seed %d failed", seed)
		}
	}
}

func runSeed(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	r := &simRun{
		t: t, rng: rng, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), finished: map[int64]string{},
		limits: Limits{MaxEvents: 1 + rng.IntN(12), MaxBytes: 200 + rng.IntN(2000), MaxWait: time.Duration(rng.IntN(3000)) * time.Millisecond},
		limit:  150 + rng.IntN(3000),
	}
	r.maxAge = time.Duration(5+rng.IntN(120)) * time.Second
	r.core = NewCore(0, deliver.RetryPolicy{Base: 100 * time.Millisecond, Max: 2 * time.Second, Min: 10 * time.Millisecond,
		MaxAttempts: 2 + rng.IntN(6), MaxAge: r.maxAge}, rng.Float64)
	events := 1 + rng.IntN(80)
	for step := 0; step < 100000 && len(r.finished) < events; step++ {
		if len(r.feed) < events && rng.IntN(3) == 0 {
			r.append()
		}
		r.read()
		if rng.IntN(50) == 0 {
			r.paused = !r.paused
		}
		if r.paused {
			r.expire()
			r.advance(time.Time{})
			continue
		}
		caughtUp := r.core.ReadFrom() == int64(len(r.feed))
		batch, wake := r.core.Next(r.now, r.limits, caughtUp)
		if batch == nil {
			r.advance(wake)
			continue
		}
		r.send(batch)
	}
	if len(r.finished) != events {
		t.Logf("window %d readTo %d sent %d attempts %d notBefore %v now %v feed %d limits %+v", len(r.core.window), r.core.readTo, r.core.sent, r.core.attempts, r.core.notBefore, r.now, len(r.feed), r.limits)
		t.Errorf("seed %d: %d of %d events finished", seed, len(r.finished), events)
	}
	for i := 1; i < len(r.delivered); i++ {
		if r.delivered[i] <= r.delivered[i-1] {
			t.Errorf("seed %d: offset %d delivered after %d", seed, r.delivered[i], r.delivered[i-1])
		}
	}
}

func (r *simRun) append() {
	off := int64(len(r.feed))
	item := fmt.Appendf(nil, `{"sequence":%d,"pad":"%s"}`, off+1, make([]byte, r.rng.IntN(400)))
	r.feed = append(r.feed, Event{Offset: off, Sequence: off + 1, AppendedAt: r.now, Item: item,
		Delivery: &event.Delivery{EventID: fmt.Sprint(off), CreatedAt: r.now}})
	r.failing = r.rng.IntN(4) == 0
}

func (r *simRun) read() {
	from := r.core.ReadFrom()
	if !r.core.WantsMore(r.limits) || from >= int64(len(r.feed)) {
		return
	}
	to := min(int64(len(r.feed)), from+1+int64(r.rng.IntN(5)))
	r.core.Add(r.feed[from:to], to)
}

func (r *simRun) advance(wake time.Time) {
	step := time.Duration(1+r.rng.IntN(500)) * time.Millisecond
	if !wake.IsZero() && wake.After(r.now) && r.rng.IntN(2) == 0 {
		step = wake.Sub(r.now)
	}
	r.now = r.now.Add(step)
}

// send is the receiver taking a batch, and the oracle's checks of it.
func (r *simRun) send(batch []Event) {
	offs := make([]int64, len(batch))
	size := bodyOverhead
	for i, e := range batch {
		offs[i] = e.Offset
		size += len(e.Item) + 1
		if _, done := r.finished[e.Offset]; done {
			r.t.Errorf("offset %d sent again after it finished", e.Offset)
		}
		if i > 0 && e.Offset != batch[i-1].Offset+1 {
			r.t.Errorf("batch %v skips an offset", offs)
		}
	}
	if len(batch) > r.limits.MaxEvents || (len(batch) > 1 && size > r.limits.MaxBytes) {
		r.t.Errorf("batch of %d events, %d bytes passes the limits %+v", len(batch), size, r.limits)
	}
	if r.lastBatch != nil && offs[0] == r.lastBatch[0] && len(offs) != len(r.lastBatch) {
		r.t.Errorf("failed batch %v retried as %v: not the same batch", r.lastBatch, offs)
	}
	var outcome deliver.Outcome
	switch {
	case size > r.limit:
		outcome = deliver.Dead
	case r.failing && r.rng.IntN(2) == 0:
		outcome = deliver.Retry
	default:
		outcome = deliver.Delivered
	}
	r.now = r.now.Add(time.Duration(1+r.rng.IntN(100)) * time.Millisecond)
	res := r.core.Done(outcome, 0, r.now)
	r.lastBatch = nil
	if outcome == deliver.Retry && res.Dead == nil {
		r.lastBatch = offs
	}
	for _, e := range res.Delivered {
		r.finish(e.Offset, "delivered")
		r.delivered = append(r.delivered, e.Offset)
	}
	for _, e := range res.Dead {
		if res.Reason == event.ReasonTooLarge && len(e.Item)+1+bodyOverhead <= r.limit {
			r.t.Errorf("offset %d dead as too large, yet it fits alone", e.Offset)
		}
		r.finish(e.Offset, res.Reason)
	}
}

// expire is a paused endpoint's only work: events past max_age die.
func (r *simRun) expire() {
	res := r.core.Expire(r.now)
	for _, e := range res.Dead {
		if r.now.Sub(e.Delivery.CreatedAt) < r.maxAge {
			r.t.Errorf("offset %d expired at age %s, under max_age %s", e.Offset, r.now.Sub(e.Delivery.CreatedAt), r.maxAge)
		}
		r.finish(e.Offset, res.Reason)
	}
}

func (r *simRun) finish(off int64, how string) {
	if prev, ok := r.finished[off]; ok {
		r.t.Errorf("offset %d finished twice: %s, then %s", off, prev, how)
	}
	r.finished[off] = how
	if off != int64(len(r.finished)-1) {
		r.t.Errorf("offset %d finished out of order (%d finished before it)", off, len(r.finished)-1)
	}
}
