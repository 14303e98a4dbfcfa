package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/laneway/laneway/engine"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/hooklog"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestPausedEndpointCoalesces sends 1,000 state updates to each of 10
// entities while the endpoint is paused, then resumes it: a stalled lane
// grows with entities, not changes, so only a handful per entity arrive,
// the last one carries the final revision, and no older revision arrives
// after a newer one.
func TestPausedEndpointCoalesces(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		events := hooklog.New[engine.Event]()
		f, a, api := scenario(t, b, func(c *app.Config) { c.OnEvent = events.Add })
		ep := api.createEndpoint(map[string]any{"tenant": "acme", "url": f.URL(1)})
		recv, _ := f.Add(1, ep.Secret, nil)
		if code, out := api.do("POST", "/v1/endpoints/"+ep.ID+"/pause", nil); code != http.StatusOK {
			t.Fatalf("pause: %d %s", code, out)
		}
		const entities, updates = 10, 1000
		var values [][]byte
		for rev := 1; rev <= updates; rev++ {
			for e := range entities {
				v, _ := json.Marshal(event.Envelope{
					ID: fmt.Sprintf("s-%d-%d", e, rev), Type: "order.updated", Tenant: "acme",
					Entity: fmt.Sprintf("order:%d", e), Revision: int64(rev), Coalesce: true,
					OccurredAt: time.Now().UTC(), Data: json.RawMessage(`{}`),
				})
				values = append(values, v)
			}
		}
		publishTo(t, a.Brokers(), a.Topics().Events, values)
		// Everything published is fanned out and parked before the resume.
		written := 0
		events.Wait(t, time.Minute, fmt.Sprintf("the fan-out to write %d deliveries", len(values)), func(e engine.Event) bool {
			if e.Kind == engine.EventFannedOut {
				written += e.Count
			}
			return written >= len(values)
		})
		if got := len(recv.Receipts()); got != 0 {
			t.Fatalf("%d deliveries reached a paused endpoint", got)
		}
		if code, out := api.do("POST", "/v1/endpoints/"+ep.ID+"/resume", nil); code != http.StatusOK {
			t.Fatalf("resume: %d %s", code, out)
		}
		waitUntil(t, f, time.Minute, "the final revision of every entity", func() bool {
			final := 0
			for _, r := range recv.Receipts() {
				if r.Revision == updates {
					final++
				}
			}
			return final >= entities
		})
		perEntity := map[string]int{}
		for _, r := range recv.Receipts() {
			perEntity[r.Entity]++
		}
		for entity, n := range perEntity {
			if n > 5 {
				t.Errorf("entity %s got %d deliveries, want a handful", entity, n)
			}
		}
		checkOrder(t, ep.ID, recv.Receipts())
	})
}
