package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestIncidentSlowEndpointIsIsolated replays the incident at test scale:
// 200 endpoints answering in ~5 ms and one answering in 3 s with
// max_concurrency 4 that receives more than it can absorb, plus one that
// answers 503 throughout. The slow endpoint never sees more than 4 requests
// at once, no healthy delivery takes as long as one slow answer,
// every partition's commit keeps advancing, and once the slow endpoint
// recovers its backlog drains in order.
func TestIncidentSlowEndpointIsIsolated(t *testing.T) {
	if testing.Short() {
		t.Skip("incident test")
	}
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		f, a, api := scenario(t, b, func(c *app.Config) {
			c.ParkAfter = 2 * time.Second
			// The 503 endpoint keeps retrying for the whole test.
			c.Retry = deliver.RetryPolicy{Base: time.Second, Max: 2 * time.Second, MaxAttempts: 1000, MaxAge: time.Hour}
		})

		const healthy = 200
		healthyEPs := make([]*fleet.Endpoint, healthy)
		for i := range healthy {
			ep := api.createEndpoint(map[string]any{"tenant": fmt.Sprintf("h%d", i), "url": f.URL(i)})
			healthyEPs[i], _ = f.Add(i, ep.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) {
				time.Sleep(5 * time.Millisecond)
				w.WriteHeader(http.StatusOK)
			})
		}
		var recovered atomic.Bool
		slowEP := api.createEndpoint(map[string]any{"tenant": "slow", "url": f.URL(1000), "max_concurrency": 4})
		slow, _ := f.Add(1000, slowEP.Secret, func(w http.ResponseWriter, r *http.Request, _ int) {
			if !recovered.Load() {
				select {
				case <-time.After(slowAnswer):
				case <-r.Context().Done():
				}
			}
			w.WriteHeader(http.StatusOK)
		})
		deadEP := api.createEndpoint(map[string]any{"tenant": "dead", "url": f.URL(1001)})
		_, _ = f.Add(1001, deadEP.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.WriteHeader(http.StatusServiceUnavailable)
		})

		load := publishSteadily(t, a, healthy, 12*time.Second)
		waitUntil(t, f, 2*time.Minute, "healthy deliveries", func() bool {
			n := 0
			for _, ep := range healthyEPs {
				n += len(ep.Receipts())
			}
			return n >= load.healthy
		})
		// The healthy traffic is all in, the slow backlog is not: every
		// partition's commit must reach its end anyway.
		if got := len(slow.Receipts()); got >= load.slow {
			t.Fatalf("slow endpoint already received all %d events: the scenario did not overload it", got)
		}
		waitCommittedToEnd(t, a)
		if p := load.commitStalls(); p != "" {
			t.Errorf("commits stopped advancing while the slow backlog grew: %s", p)
		}

		checkHealthyLatency(t, healthyEPs)
		if parks := counterSum(t, a, "laneway_lanes_parked_total"); parks < 2 {
			t.Errorf("%v lanes parked, want the slow and the failing endpoint", parks)
		}
		if m := slow.MaxInFlight(); m > 4 {
			t.Errorf("slow endpoint saw %d concurrent requests, limit 4", m)
		}

		recovered.Store(true)
		waitUntil(t, f, 2*time.Minute, "the slow backlog", func() bool { return distinctIDs(slow.Receipts()) >= load.slow })
		receipts := slow.Receipts()
		checkOrder(t, slowEP.ID, receipts)
		if ids := distinctIDs(receipts); ids != load.slow {
			t.Errorf("slow endpoint got %d distinct events, want %d", ids, load.slow)
		}
	})
}

// steadyLoad is what publishSteadily sent and saw.
type steadyLoad struct {
	healthy, slow int
	samples       []commitSample
}

type commitSample struct {
	committed, end map[int32]int64
}

// publishSteadily sends one event per healthy endpoint per second and 4 per
// second to the slow and the dead endpoint, sampling the delivery group's
// commits every 2 s.
func publishSteadily(t *testing.T, a *app.App, healthy int, d time.Duration) steadyLoad {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers()...), kgo.DefaultProduceTopic(a.Topics().Events), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	var load steadyLoad
	revisions := map[string]int64{}
	tick := time.NewTicker(250 * time.Millisecond) // pacing the load, not synchronising
	defer tick.Stop()
	for i := 0; i < int(d/(250*time.Millisecond)); i++ {
		<-tick.C
		var recs []*kgo.Record
		for n := range healthy / 4 {
			tenant := fmt.Sprintf("h%d", (i%4)*(healthy/4)+n)
			recs = append(recs, steadyRecord(tenant, tenant+":e", revisions))
			load.healthy++
		}
		entity := fmt.Sprintf("order:%d", i%8)
		recs = append(recs, steadyRecord("slow", entity, revisions), steadyRecord("dead", entity, revisions))
		load.slow++
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("publish: %v", err)
		}
		if i%8 == 0 {
			load.samples = append(load.samples, sampleCommits(t, a))
		}
	}
	return load
}

func steadyRecord(tenant, entity string, revisions map[string]int64) *kgo.Record {
	key := tenant + "/" + entity
	revisions[key]++
	value, _ := json.Marshal(event.Envelope{
		Type: "order.updated", Tenant: tenant, Entity: entity, Revision: revisions[key],
		ID: fmt.Sprintf("%s-%d", key, revisions[key]), OccurredAt: time.Now().UTC(),
	})
	return &kgo.Record{Key: []byte(entity), Value: value}
}

func sampleCommits(t *testing.T, a *app.App) commitSample {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := commitSample{committed: map[int32]int64{}, end: map[int32]int64{}}
	if offs, err := adm.FetchOffsets(ctx, a.DeliveriesGroup()); err == nil {
		offs.Each(func(o kadm.OffsetResponse) { s.committed[o.Partition] = o.At })
	}
	if ends, err := adm.ListEndOffsets(ctx, a.Topics().Deliveries); err == nil {
		ends.Each(func(o kadm.ListedOffset) { s.end[o.Partition] = o.Offset })
	}
	return s
}

// stallWindow is how many samples (2 s apart) a commit may stand still
// while records wait: a lane waiting to park holds its partition's commit
// for up to park_after (2 s here), and the commit follows within the
// commit interval (1 s), so one sample interval is too short to call a
// stall, two are not.
const stallWindow = 2

// commitStalls names a partition whose commit did not move across
// stallWindow samples although records were waiting above it. The fan-out
// writes in transactions, so the last offset of a caught-up partition is a
// commit marker, never a delivery: a partition is behind when its commit is
// below end-1.
func (l steadyLoad) commitStalls() string {
	for i := stallWindow; i < len(l.samples); i++ {
		prev, cur := l.samples[i-stallWindow], l.samples[i]
		for p, end := range prev.end {
			if end > prev.committed[p]+1 && cur.committed[p] <= prev.committed[p] {
				return fmt.Sprintf("partition %d stayed at %d (end %d) between samples %d and %d", p, prev.committed[p], end, i-stallWindow, i)
			}
		}
	}
	return ""
}

// waitCommittedToEnd waits until every deliveries partition is committed up
// to its last transaction marker (see commitStalls).
func waitCommittedToEnd(t *testing.T, a *app.App) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	for {
		s := sampleCommits(t, a)
		behind := ""
		for p, end := range s.end {
			if s.committed[p] < end-1 {
				behind = fmt.Sprintf("partition %d committed %d of %d", p, s.committed[p], end)
			}
		}
		if behind == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("commits did not reach the end: %s", behind)
		}
		<-poll.C
	}
}

// slowAnswer is how long the slow endpoint takes to answer.
const slowAnswer = 3 * time.Second

// checkHealthyLatency fails when any healthy delivery took as long as one
// slow answer, publish to receipt. Healthy deliveries that queue behind the
// slow endpoint's attempts (3 s each, its backlog growing all along) take
// that long and more; a bound under it (half, on the p99, until now) also
// measured the machine's load: with the fault scenarios beside it on two
// cores, the p99 reached 1.55 s with no delivery queued. (The latency
// figures are in docs/benchmarks.md.)
func checkHealthyLatency(t *testing.T, eps []*fleet.Endpoint) {
	t.Helper()
	var lat []time.Duration
	for _, ep := range eps {
		for _, r := range ep.Receipts() {
			lat = append(lat, r.At.Sub(r.Timestamp))
		}
	}
	if len(lat) == 0 {
		t.Fatal("no healthy deliveries")
	}
	slices.Sort(lat)
	p99 := lat[len(lat)*99/100]
	t.Logf("healthy deliveries %d: p50 %v p99 %v max %v", len(lat), lat[len(lat)/2], p99, lat[len(lat)-1])
	if worst := lat[len(lat)-1]; worst >= slowAnswer {
		t.Errorf("a healthy delivery took %v, as long as a slow answer (%v): it waited behind the slow endpoint", worst, slowAnswer)
	}
}
