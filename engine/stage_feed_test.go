package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/modes/feed"
	"github.com/laneway/laneway/internal/testkit/deadtopic"
)

// flakyFeed fails every third append before it reaches the feed, so the
// lane's retries are part of what the order must survive.
type flakyFeed struct {
	*feed.Writer
	n atomic.Int64

	mu   sync.Mutex
	seen map[string]bool // bodies appended before
}

// Append fails the first append of every third delivery. Per delivery, not
// every third append: with three deliveries retrying in step, that would
// fail the same one every time, until max_attempts dead-letters it.
func (f *flakyFeed) Append(ctx context.Context, topic, key string, body []byte) error {
	f.n.Add(1)
	f.mu.Lock()
	first := !f.seen[string(body)]
	if first {
		if f.seen == nil {
			f.seen = map[string]bool{}
		}
		f.seen[string(body)] = true
	}
	fail := first && len(f.seen)%3 == 0
	f.mu.Unlock()
	if fail {
		return errors.New("broker unavailable (injected)")
	}
	return f.Writer.Append(ctx, topic, key, body)
}

// A pull endpoint's deliveries are appended to its feed instead of POSTed:
// every revision of every entity, each entity's in order, through failed
// appends that are retried like failed attempts (issue #17, pull feed).
func TestPullEndpointAppendsToItsFeedInOrder(t *testing.T) {
	stageBackends(t, 1, func(t *testing.T, r *stageRig) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pull := testEndpoint("ep_pull", "")
		pull.Mode, pull.Payload = endpoint.ModePull, endpoint.PayloadThin
		if err := topics.EnsureFeed(ctx, r.adm, r.tops, r.tops.Feed(pull.ID)); err != nil {
			t.Fatal(err)
		}
		w, err := feed.NewWriter(feed.WriterConfig{Client: r.cl})
		if err != nil {
			t.Fatal(err)
		}
		flaky := &flakyFeed{Writer: w}
		s := r.startStage(stageOpts{endpoints: newFakeEndpoints(pull), breakers: newFakeBreakers(),
			tweak: func(c *DeliveryConfig) { c.Feed = flaky }})
		s.waitOwned(t, 0)
		const entities, revisions = 5, 6
		for rev := int64(1); rev <= revisions; rev++ {
			for e := range entities {
				r.produce(0, testDelivery(fmt.Sprintf("ev-%d-%d", e, rev), pull.ID, fmt.Sprintf("order:%d", e), rev))
			}
		}
		var recs []*kgo.Record
		waitCond(t, 30*time.Second, "every delivery in the feed", func() (bool, string) {
			recs = r.readAll(r.tops.Feed(pull.ID))
			return len(recs) >= entities*revisions, fmt.Sprintf("%d of %d", len(recs), entities*revisions)
		})
		last := map[string]int64{}
		seen := map[string]bool{}
		for i, rec := range recs {
			var ev struct {
				ID     string          `json:"id"`
				Data   json.RawMessage `json:"data"`
				Entity struct {
					ID       string `json:"id"`
					Revision int64  `json:"revision"`
				} `json:"entity"`
			}
			if err := json.Unmarshal(rec.Value, &ev); err != nil {
				t.Fatalf("feed record %d: %v", i, err)
			}
			if rec.Offset != int64(i) {
				t.Fatalf("record %d at offset %d: the feed's sequence has a gap", i, rec.Offset)
			}
			if ev.Entity.Revision <= last[ev.Entity.ID] && !seen[ev.ID] {
				t.Fatalf("%s revision %d after %d", ev.Entity.ID, ev.Entity.Revision, last[ev.Entity.ID])
			}
			if ev.Data != nil {
				t.Fatalf("a thin endpoint's feed event carries data: %s", rec.Value)
			}
			last[ev.Entity.ID], seen[ev.ID] = ev.Entity.Revision, true
		}
		if len(seen) != entities*revisions {
			t.Fatalf("%d distinct events in the feed, want %d", len(seen), entities*revisions)
		}
		if got := r.deadLetters(); len(got) != 0 {
			t.Fatalf("dead letters of a pull endpoint whose appends fail once: %s", deadtopic.Describe(got))
		}
		if flaky.n.Load() < entities*revisions+entities*revisions/3 {
			t.Fatalf("%d appends: the injected failures were not retried", flaky.n.Load())
		}
	})
}
