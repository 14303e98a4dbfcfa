package app_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestRebalanceKeepsOrder moves partitions between two instances while a
// slow endpoint's backlog is parked: a second instance joins mid-stream and
// the first one leaves. Every event arrives and no entity's revisions are
// first delivered out of order, whichever instance delivered them.
func TestRebalanceKeepsOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("rebalance test")
	}
	backends := testenv.Kafkas(t)
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			f, err := fleet.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ns := testenv.Unique("rebal")
			shared := func(id string) func(*app.Config) {
				return func(c *app.Config) {
					shareCluster(c, ns, id)
					c.ParkAfter = 300 * time.Millisecond
					c.SessionTimeout = 6 * time.Second
				}
			}
			first := startApp(t, b, shared("a"))
			api := newAPI(t, first.HTTPAddr())

			const endpoints, perEndpoint, entities = 4, 150, 6
			var recvs []*fleet.Endpoint
			for i := range endpoints {
				ep := api.createEndpoint(map[string]any{"tenant": fmt.Sprintf("t%d", i), "url": f.URL(i), "max_concurrency": 2})
				r, _ := f.Add(i, ep.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) {
					time.Sleep(10 * time.Millisecond) // slow enough to park
					w.WriteHeader(http.StatusOK)
				})
				recvs = append(recvs, r)
			}
			publishRound := func(round int) {
				for i := range endpoints {
					var values [][]byte
					for n := range perEndpoint / 2 {
						seq := round*perEndpoint/2 + n
						values = append(values, envelope(fmt.Sprintf("r-%d-%d", i, seq), fmt.Sprintf("t%d", i),
							fmt.Sprintf("order:%d", seq%entities), int64(seq/entities+1)))
					}
					publishTo(t, first.Brokers(), first.Topics().Events, values)
				}
			}
			publishRound(0)
			waitUntil(t, f, time.Minute, "the first deliveries", func() bool { return f.Total() >= 100 })
			second := startApp(t, b, shared("b"))
			publishRound(1)
			waitUntil(t, f, time.Minute, "deliveries after the join", func() bool { return f.Total() >= 300 })
			stopApp(t, first)

			waitUntil(t, f, 3*time.Minute, "every event", func() bool {
				for _, r := range recvs {
					if distinctIDs(r.Receipts()) < perEndpoint {
						return false
					}
				}
				return true
			})
			for _, r := range recvs {
				checkFirstDeliveryOrder(t, r.Receipts())
			}
			_ = second
		})
	}
}
