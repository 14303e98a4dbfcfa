package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/modes/feed"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/testenv"
	"github.com/laneway/laneway/receiver"
)

// startBatchReceiver serves a fleet.BatchReceiver that answers 413 above
// limit bytes and 503 to its first failures batches, and returns it with
// its URL.
func startBatchReceiver(t *testing.T, limit, failures int) (*fleet.BatchReceiver, string) {
	recv := fleet.NewBatchReceiver(fleet.BatchConfig{Limit: limit, Failures: failures})
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	return recv, srv.URL
}

// waitBatches checks cond after each answer of recv until it holds.
func waitBatches(t *testing.T, recv *fleet.BatchReceiver, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-recv.Changed():
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s (receiver: %d batches accepted, %+v)",
				within, what, len(recv.Accepted()), recv.Stats())
		}
	}
}

// A batch endpoint gets its events in signed batches of at most
// max_events, in one order for the whole endpoint: across failed batches
// retried whole and a 413 that splits batches down to the one event too
// large, which is dead-lettered with its sequence and, redriven, comes
// back under it (issue #17).
func TestBatchEndpointDeliversInSequenceOrder(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		recv, recvURL := startBatchReceiver(t, 3000, 2)
		a := startApp(t, b, nil)
		api := newAPI(t, a.HTTPAddr())
		ep := api.createEndpoint(map[string]any{"tenant": "acme", "mode": "batch", "url": recvURL,
			"batch": map[string]any{"max_events": 5, "max_wait_ms": 20}})
		recv.SetEndpoint(ep.ID, ep.Secret)
		const events = 40
		big := 17 // this event alone is above the receiver's limit
		for i := range events {
			data := map[string]any{"i": i}
			if i == big {
				data["pad"] = strings.Repeat("x", 4000)
			}
			code, out := api.do("POST", "/v1/events", map[string]any{"type": "order.updated", "tenant": "acme",
				"entity": fmt.Sprintf("order:%d", i%3), "revision": i + 1, "data": data})
			if code != http.StatusAccepted {
				t.Fatalf("publish: %d %s", code, out)
			}
		}
		letters := waitDeadLetters(t, api, ep.ID, 1)
		if l := letters[0]; l.Reason != event.ReasonTooLarge || l.Delivery == nil || l.Delivery.Sequence == 0 {
			t.Fatalf("dead letter %+v: want payload_too_large with its sequence", l)
		}
		waitBatches(t, recv, time.Minute, "every other event accepted", func() bool {
			n := 0
			for _, b := range recv.Accepted() {
				n += len(b)
			}
			return n >= events-1
		})
		batches, st := recv.Accepted(), recv.Stats()
		if st.Bad > 0 || st.TooLarge == 0 {
			t.Fatalf("%d bad requests (%s), %d refused as too large", st.Bad, st.BadDetail, st.TooLarge)
		}
		checkBatchOrder(t, batches, 5)
		t.Logf("%d batches accepted, %d refused as too large, %d failed with 503", len(batches), st.TooLarge, st.Failed)

		// Redriven with the limit raised, it comes back under its sequence.
		recv.SetLimit(1 << 20)
		startRedrive(t, api, ep.ID)
		want := letters[0].Delivery.Sequence
		waitBatches(t, recv, time.Minute, "the redriven event", func() bool {
			batches := recv.Accepted()
			last := batches[len(batches)-1]
			return last[len(last)-1].Sequence == want
		})
	})
}

// checkBatchOrder checks batch sizes and that sequences first accepted
// rise across every batch.
func checkBatchOrder(t *testing.T, batches [][]receiver.FeedEvent, maxEvents int) {
	t.Helper()
	seen := map[string]bool{}
	last := int64(0)
	for _, b := range batches {
		if len(b) > maxEvents {
			t.Errorf("a batch of %d events, above max_events %d", len(b), maxEvents)
		}
		for _, it := range b {
			if seen[it.ID] {
				continue // a batch retried after its answer was lost
			}
			if it.Sequence <= last {
				t.Errorf("sequence %d first accepted after %d", it.Sequence, last)
			}
			seen[it.ID], last = true, it.Sequence
		}
	}
}

// A batch endpoint deleted while its receiver fails leaves nothing behind:
// every event of its backlog becomes a dead letter (endpoint_deleted),
// then its topic is deleted.
func TestDeletedBatchEndpointDrainsIntoDeadLetters(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		recv, recvURL := startBatchReceiver(t, 1<<20, 1<<30) // answers 503, always
		a := startApp(t, b, nil)
		api := newAPI(t, a.HTTPAddr())
		ep := api.createEndpoint(map[string]any{"tenant": "acme", "mode": "batch", "url": recvURL,
			"batch": map[string]any{"max_events": 5, "max_wait_ms": 1}})
		recv.SetEndpoint(ep.ID, ep.Secret)
		const events = 12
		for i := range int(events) {
			code, out := api.do("POST", "/v1/events", map[string]any{"type": "order.updated", "tenant": "acme",
				"entity": fmt.Sprintf("order:%d", i%2), "revision": i + 1, "data": map[string]int{"i": i}})
			if code != http.StatusAccepted {
				t.Fatalf("publish: %d %s", code, out)
			}
		}
		// Every event must be in the backlog first: an event the fan-out
		// meets after the delete is for no endpoint, and owes it nothing.
		waitBacklog(t, api, ep.ID, events)
		waitBatches(t, recv, 2*time.Minute, "a failed batch", func() bool { return recv.Stats().Failed > 0 })
		if code, out := api.do("DELETE", "/v1/endpoints/"+ep.ID, nil); code != http.StatusNoContent {
			t.Fatalf("delete: %d %s", code, out)
		}
		// Deliveries still in the lane die there (no sequence: they never
		// reached the backlog); the backlog's die in the runner, each with
		// its sequence.
		letters := waitDeadLetters(t, api, ep.ID, events)
		ids, seqs := map[string]bool{}, map[int64]bool{}
		for _, l := range letters {
			if l.Reason != event.ReasonEndpointDeleted && l.Reason != event.ReasonMaxAttempts {
				t.Errorf("dead letter %s: reason %s", l.ID, l.Reason)
			}
			if l.Delivery == nil || ids[l.ID] {
				t.Errorf("dead letter %s: no delivery, or twice", l.ID)
				continue
			}
			ids[l.ID] = true
			if s := l.Delivery.Sequence; s != 0 {
				if seqs[s] {
					t.Errorf("sequence %d dead twice", s)
				}
				seqs[s] = true
			}
		}
		if len(seqs) == 0 {
			t.Error("no dead letter came from the backlog: the test did not reach the runner's drain")
		}
		topic := a.Topics().BatchFeed(ep.ID)
		cl, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		deadline := time.Now().Add(time.Minute)
		for {
			listed, err := adm.ListTopics(context.Background(), topic)
			if d, ok := listed[topic]; err == nil && (!ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the deleted endpoint's backlog topic %s is still there", topic)
			}
			time.Sleep(100 * time.Millisecond) // polling Kafka's metadata: no event tells of a deleted topic
		}
	})
}

// waitBacklog waits until the batch endpoint's backlog holds n events.
func waitBacklog(t *testing.T, api apiClient, id string, n int64) {
	t.Helper()
	want := feed.Cursor(n)
	deadline := time.Now().Add(time.Minute)
	for {
		code, out := api.do("GET", "/v1/endpoints/"+id, nil)
		var e struct {
			Feed *struct {
				EndCursor string `json:"end_cursor"`
			} `json:"feed"`
		}
		if code == http.StatusOK && json.Unmarshal(out, &e) == nil && e.Feed != nil && e.Feed.EndCursor == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backlog of %s never held %d events: %d %s", id, n, code, out)
		}
		time.Sleep(50 * time.Millisecond) // polling the API: no event tells of an append
	}
}

// A paused batch endpoint sends nothing, but its backlog still dies of
// old age: max_age holds whatever the pause, so the topic's retention
// (longer) never drops an event without its dead letter.
func TestPausedBatchEndpointBacklogExpires(t *testing.T) {
	recv, recvURL := startBatchReceiver(t, 1<<20, 1<<30) // answers 503, always
	a := startApp(t, testenv.Embedded, func(c *app.Config) {
		// max_age must leave the fan-out and the lane time to append the
		// events first (seconds on a loaded machine), or they die in the lane.
		c.Retry = deliver.RetryPolicy{Base: 50 * time.Millisecond, Max: 100 * time.Millisecond, MaxAttempts: 1000, MaxAge: 15 * time.Second}
	})
	api := newAPI(t, a.HTTPAddr())
	ep := api.createEndpoint(map[string]any{"tenant": "acme", "mode": "batch", "url": recvURL,
		"batch": map[string]any{"max_events": 2, "max_wait_ms": 1}})
	recv.SetEndpoint(ep.ID, ep.Secret)
	for i := range 4 {
		code, out := api.do("POST", "/v1/events", map[string]any{"type": "order.updated", "tenant": "acme",
			"entity": "order:1", "revision": i + 1, "data": map[string]int{"i": i}})
		if code != http.StatusAccepted {
			t.Fatalf("publish: %d %s", code, out)
		}
	}
	waitBacklog(t, api, ep.ID, 4)
	if code, out := api.do("POST", "/v1/endpoints/"+ep.ID+"/pause", nil); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, out)
	}
	// The store applies the pause at once; a batch already on its way may
	// still end, none may start after it.
	sentAtPause := recv.Stats().Requests
	letters := waitDeadLetters(t, api, ep.ID, 4)
	for _, l := range letters {
		if l.Reason != event.ReasonMaxAge || l.Delivery == nil || l.Delivery.Sequence == 0 {
			t.Errorf("dead letter %s: reason %s, delivery %+v; want max_age with its sequence", l.ID, l.Reason, l.Delivery)
		}
	}
	if sent := recv.Stats().Requests; sent > sentAtPause+1 {
		t.Errorf("%d batches sent after the pause", sent-sentAtPause)
	}
}
