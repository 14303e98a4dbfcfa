package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/model/event"
)

// traffic publishes the demo's events through the API at a steady rate,
// spread evenly over the tenants and over each tenant's entities. A share of
// them are coalescing state updates ("order.updated"), the rest facts
// ("payment.captured").
//
// Each entity is published by one worker, one event at a time, so that its
// revisions reach Kafka in order.
type traffic struct {
	c             *client.Client
	tenants       []string
	entities      int
	coalesceShare float64
	rate          float64
	workers       int

	sent, failed, skipped atomic.Int64
	errMu                 sync.Mutex
	lastErr               string
}

// demoEvent is one event the demo publishes. Its ID is left empty: the API
// gives each event one.
type demoEvent = event.Envelope

var orderStatuses = []string{"placed", "paid", "packed", "shipped", "delivered"}

// run publishes until ctx ends, then waits for the requests under way.
func (t *traffic) run(ctx context.Context) {
	queues := make([]chan demoEvent, t.workers)
	var wg sync.WaitGroup
	for i := range queues {
		queues[i] = make(chan demoEvent, 64)
		wg.Add(1)
		go func(q <-chan demoEvent) {
			defer wg.Done()
			for ev := range q {
				t.publish(ctx, ev)
			}
		}(queues[i])
	}
	defer wg.Wait()
	defer func() {
		for _, q := range queues {
			close(q)
		}
	}()

	revisions := map[string]int64{}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var n int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due := int64(t.rate * time.Since(start).Seconds())
		for ; n < due; n++ {
			tenant := t.tenants[n%int64(len(t.tenants))]
			entity := fmt.Sprintf("order:%d", rand.IntN(t.entities))
			key := tenant + "/" + entity
			revisions[key]++
			ev := demoEvent{Tenant: tenant, Entity: entity, Revision: revisions[key]}
			if rand.Float64() < t.coalesceShare {
				ev.Type, ev.Coalesce = "order.updated", true
				ev.Data = fmt.Appendf(nil, `{"status":%q,"total_cents":%d}`, orderStatuses[rand.IntN(len(orderStatuses))], 1000+rand.IntN(90000))
			} else {
				ev.Type = "payment.captured"
				ev.Data = fmt.Appendf(nil, `{"amount_cents":%d,"currency":"EUR"}`, 100+rand.IntN(50000))
			}
			h := fnv.New32a()
			h.Write([]byte(key))
			select {
			case queues[h.Sum32()%uint32(len(queues))] <- ev:
			default:
				t.skipped.Add(1) // the API is not keeping up; keep the pace
			}
		}
	}
}

func (t *traffic) publish(ctx context.Context, ev demoEvent) {
	if ctx.Err() != nil {
		return
	}
	ev.OccurredAt = time.Now().UTC() // latency is measured from here
	body, err := json.Marshal(ev)
	if err != nil {
		t.fail(err)
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := t.c.PublishEvent(pctx, body, ""); err != nil {
		if ctx.Err() == nil {
			t.fail(err)
		}
		return
	}
	t.sent.Add(1)
}

func (t *traffic) fail(err error) {
	t.failed.Add(1)
	t.errMu.Lock()
	t.lastErr = err.Error()
	t.errMu.Unlock()
}

func (t *traffic) lastError() string {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	return t.lastErr
}
