package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/partition"
)

// groupFetchWaitMs marks the group client's fetches (FetchMaxWait) apart
// from the parked and replay readers' own.
const groupFetchWaitMs = 123

// TestParkedAppendsBackpressureTheDeliveriesFetch parks a paused endpoint's
// deliveries while kfake refuses every produce to the parked topic
// (with a retriable error, which the producer retries forever), so no parked
// append is acknowledged. Once more than partition.DefaultMaxQueuedAppends
// appends wait, the stage must stop fetching the deliveries partition:
// the owner reports Backpressured, the group client's paused partitions
// include it, and, seen from the broker, its fetch requests leave the
// partition out while they go on for the other one; records produced
// meanwhile are not taken (the partition's watermark lag gauge stays put).
// Once the parked topic accepts produces again, fetching resumes and every
// delivery is parked and committed.
func TestParkedAppendsBackpressureTheDeliveriesFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("produces more than 20000 deliveries")
	}
	// NOT_ENOUGH_REPLICAS: the parked partition's ISR is too small;
	// NOT_LEADER_FOR_PARTITION: it has no leader (the producer refreshes
	// its metadata and tries again). Both are retried without end.
	for _, refusal := range []*kerr.Error{kerr.NotEnoughReplicas, kerr.NotLeaderForPartition} {
		t.Run(refusal.Message, func(t *testing.T) { testBackpressure(t, refusal) })
	}
}

func testBackpressure(t *testing.T, refusal *kerr.Error) {
	r := kfakeStageRig(t, 2)
	fetches := watchGroupFetches(t, r)
	ep := testEndpoint("ep-paused", "http://127.0.0.1:9/never")
	ep.Paused = true
	s := r.startStage(stageOpts{endpoints: newFakeEndpoints(ep), tweak: func(c *DeliveryConfig) {
		// Every fetch names each partition it wants (no fetch session), so
		// a paused partition shows as missing.
		c.ClientOpts = []kgo.Opt{kgo.FetchMaxWait(groupFetchWaitMs * time.Millisecond), kgo.DisableFetchSessions()}
	}})
	s.waitOwned(t, 0)
	s.waitOwned(t, 1)
	refused := r.cluster.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Produce}, Topic: r.tops.Parked, Err: refusal, Count: -1,
	})

	first := partition.DefaultMaxQueuedAppends + 2000
	r.produce(0, manyDeliveries("a", "ep-paused", first)...)
	waitCond(t, 2*time.Minute, "the owner to be backpressured and partition 0 paused", func() (bool, string) {
		bp, fp := s.ownerState(0)
		paused := slices.Contains(s.client.PauseFetchPartitions(nil)[r.tops.Deliveries], 0)
		return bp && paused, fmt.Sprintf("backpressured %t, fetch paused %t, queued appends %d, tracked %d", bp, paused, fp.QueuedAppends, fp.Tracked)
	})
	if n := refused.Hits(); n == 0 {
		t.Fatal("no parked produce was refused: the appends were never issued")
	}
	lag, ok := metricValue(t, s.reg, "laneway_partition_watermark_lag_offsets", "partition", "0")
	if !ok {
		t.Fatal("no watermark lag gauge for partition 0")
	}
	_, before := s.ownerState(0)
	t.Logf("backpressured with %d parked appends waiting (lag %v)", before.QueuedAppends, lag)

	// More deliveries arrive; the group client keeps fetching partition 1
	// and leaves partition 0 out.
	const more = 5000
	r.produce(0, manyDeliveries("b", "ep-paused", more)...)
	mark := fetches.count()
	waitCond(t, time.Minute, "ten group fetches after the new records", func() (bool, string) {
		return fetches.count() >= mark+10, fmt.Sprintf("%d fetches", fetches.count()-mark)
	})
	for _, f := range fetches.since(mark) {
		if slices.Contains(f, 0) {
			t.Fatalf("a fetch of the group client asked for paused partition 0: %v", f)
		}
		if !slices.Contains(f, 1) {
			t.Fatalf("a fetch of the group client left partition 1 out too: %v", f)
		}
	}
	if now, _ := metricValue(t, s.reg, "laneway_partition_watermark_lag_offsets", "partition", "0"); now != lag {
		t.Fatalf("watermark lag of partition 0 went from %v to %v while its fetching was paused", lag, now)
	}
	if _, after := s.ownerState(0); after.QueuedAppends != before.QueuedAppends || after.Tracked != before.Tracked {
		t.Fatalf("the owner took records while paused: queued appends %d -> %d, tracked %d -> %d",
			before.QueuedAppends, after.QueuedAppends, before.Tracked, after.Tracked)
	}

	// The parked topic recovers: appends land, fetching resumes, and every
	// delivery ends up parked and committed.
	refused.Remove()
	total := int64(first + more)
	waitCond(t, 2*time.Minute, "every delivery to be parked and committed", func() (bool, string) {
		at := r.committed(0)
		parked := r.endOffset(r.tops.Parked, 0)
		return at == total && parked >= total, fmt.Sprintf("committed %d, parked end %d, want %d", at, parked, total)
	})
	if !slices.ContainsFunc(fetches.since(mark), func(f []int32) bool { return slices.Contains(f, 0) }) {
		t.Fatal("partition 0 was committed to its end without a fetch of it after the pause")
	}
	if paused := s.client.PauseFetchPartitions(nil)[r.tops.Deliveries]; slices.Contains(paused, 0) {
		t.Fatalf("partition 0 still paused after the backlog was parked: %v", paused)
	}
}

// ownerState returns whether partition p's owner is backpressured, and
// its footprint.
func (ts *testStage) ownerState(p int32) (backpressured bool, fp partition.Footprint) {
	if d := ts.owned(p); d != nil {
		d.do(func(o *partition.Owner) { backpressured, fp = o.Backpressured(), o.Footprint() })
	}
	return backpressured, fp
}

func manyDeliveries(prefix, endpointID string, n int) []event.Delivery {
	out := make([]event.Delivery, n)
	for i := range out {
		out[i] = testDelivery(fmt.Sprintf("%s-%d", prefix, i), endpointID, fmt.Sprintf("order:%d", i%100), int64(i/100+1))
	}
	return out
}

// groupFetches records, for each fetch request of the stage's group client
// (told apart by its max wait), the deliveries partitions it asked for.
type groupFetches struct {
	mu   sync.Mutex
	reqs [][]int32
}

func (g *groupFetches) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.reqs)
}

func (g *groupFetches) since(n int) [][]int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.reqs[n:])
}

func watchGroupFetches(t *testing.T, r *stageRig) *groupFetches {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	details, err := r.adm.ListTopics(ctx, r.tops.Deliveries)
	if err != nil {
		t.Fatal(err)
	}
	id := details[r.tops.Deliveries].ID
	g := &groupFetches{}
	r.cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f, ok := req.(*kmsg.FetchRequest)
		if !ok || f.MaxWaitMillis != groupFetchWaitMs {
			return nil, nil, false
		}
		var parts []int32
		for _, ft := range f.Topics {
			if ft.Topic == r.tops.Deliveries || ft.TopicID == id {
				for _, fp := range ft.Partitions {
					parts = append(parts, fp.Partition)
				}
			}
		}
		g.mu.Lock()
		g.reqs = append(g.reqs, parts)
		g.mu.Unlock()
		return nil, nil, false // observed only: the cluster answers as usual
	})
	return g
}
