package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

type endpointHealth struct {
	ID     string `json:"id"`
	Health struct {
		Pending                 int     `json:"pending"`
		InFlight                int     `json:"in_flight"`
		Parked                  int     `json:"parked"`
		OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
		ParkedReason            string  `json:"parked_reason"`
		Breaker                 struct {
			State               string `json:"state"`
			ConsecutiveFailures int    `json:"consecutive_failures"`
		} `json:"breaker"`
		LastError     string     `json:"last_error"`
		LastSuccessAt *time.Time `json:"last_success_at"`
		PerMinute     struct {
			Delivered int64 `json:"delivered"`
			Failed    int64 `json:"failed"`
		} `json:"per_minute"`
		Owner string `json:"owner"`
	} `json:"health"`
}

// TestHealthReportsAKnownBacklog builds three endpoints whose state is known
// — one paused with 40 deliveries waiting, one that took 25 deliveries, one
// failing — and checks what GET /v1/endpoints/{id}, the list sorted by
// oldest pending age and GET /v1/health report about them.
func TestHealthReportsAKnownBacklog(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		f, a, api := scenario(t, b, func(c *app.Config) {
			c.Breaker = breaker.Config{Threshold: 1000, FirstPause: time.Minute, MaxPause: time.Minute}
			c.Retry = deliver.RetryPolicy{Base: 20 * time.Millisecond, Min: 20 * time.Millisecond, Max: 40 * time.Millisecond,
				MaxAttempts: 1000, MaxAge: time.Hour}
		})
		paused := api.createEndpoint(map[string]any{"tenant": "paused", "url": f.URL(1)})
		healthy := api.createEndpoint(map[string]any{"tenant": "healthy", "url": f.URL(2)})
		failing := api.createEndpoint(map[string]any{"tenant": "failing", "url": f.URL(3)})
		f.Add(1, paused.Secret, nil)
		recv, _ := f.Add(2, healthy.Secret, nil)
		f.Add(3, failing.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.WriteHeader(http.StatusInternalServerError)
		})
		if code, out := api.do("POST", "/v1/endpoints/"+paused.ID+"/pause", nil); code != http.StatusOK {
			t.Fatalf("pause: %d %s", code, out)
		}
		var values [][]byte
		for i := range 40 {
			values = append(values, envelope(fmt.Sprintf("p-%d", i), "paused", fmt.Sprintf("e:%d", i%4), int64(i/4+1)))
		}
		for i := range 25 {
			values = append(values, envelope(fmt.Sprintf("h-%d", i), "healthy", fmt.Sprintf("e:%d", i%5), int64(i/5+1)))
		}
		values = append(values, envelope("f-0", "failing", "e:0", 1))
		publishTo(t, a.Brokers(), a.Topics().Events, values)
		waitUntil(t, f, time.Minute, "the healthy endpoint's 25 deliveries", func() bool { return distinctIDs(recv.Receipts()) >= 25 })

		var p, h, x endpointHealth
		waitHealth(t, api, paused.ID, &p, func() bool { return p.Health.Parked+p.Health.Pending == 40 && p.Health.ParkedReason == "paused" })
		if p.Health.OldestPendingAgeSeconds <= 0 || p.Health.Owner == "" || p.Health.PerMinute.Delivered != 0 {
			t.Fatalf("paused endpoint health %+v", p.Health)
		}
		waitHealth(t, api, healthy.ID, &h, func() bool { return h.Health.PerMinute.Delivered == 25 })
		if h.Health.LastSuccessAt == nil || h.Health.Pending != 0 || h.Health.OldestPendingAgeSeconds != 0 || h.Health.Breaker.State != "closed" {
			t.Fatalf("healthy endpoint health %+v", h.Health)
		}
		waitHealth(t, api, failing.ID, &x, func() bool { return x.Health.PerMinute.Failed >= 2 && x.Health.Breaker.ConsecutiveFailures >= 2 })
		if x.Health.LastError == "" || x.Health.LastSuccessAt != nil {
			t.Fatalf("failing endpoint health %+v", x.Health)
		}

		// The paused endpoint is the most behind; the platform figure over
		// healthy endpoints does not count it.
		code, out := api.do("GET", "/v1/endpoints?sort=oldest_pending_age&limit=2", nil)
		var list struct{ Data []endpointHealth }
		if code != http.StatusOK || json.Unmarshal(out, &list) != nil || len(list.Data) != 2 || list.Data[0].ID != paused.ID {
			t.Fatalf("most behind: %d %s", code, out)
		}
		code, out = api.do("GET", "/v1/health", nil)
		var platform struct {
			Oldest     float64 `json:"oldest_pending_age_seconds"`
			Healthy    float64 `json:"healthy_oldest_pending_age_seconds"`
			MostBehind string  `json:"most_behind_endpoint_id"`
			Endpoints  struct {
				Total, Paused, Parked int
			} `json:"endpoints"`
		}
		if code != http.StatusOK || json.Unmarshal(out, &platform) != nil {
			t.Fatalf("GET /v1/health: %d %s", code, out)
		}
		if platform.MostBehind != paused.ID || platform.Healthy >= platform.Oldest || platform.Endpoints.Total != 3 || platform.Endpoints.Paused != 1 {
			t.Fatalf("platform health %s", out)
		}
	})
}

// waitHealth polls GET /v1/endpoints/{id} until cond holds for what it
// decoded into into (snapshots are published every second).
func waitHealth(t *testing.T, api apiClient, id string, into *endpointHealth, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out := api.do("GET", "/v1/endpoints/"+id, nil)
		*into = endpointHealth{}
		if code != http.StatusOK || json.Unmarshal(out, into) != nil {
			t.Fatalf("GET endpoint: %d %s", code, out)
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint %s health never matched: %s", id, out)
		}
		time.Sleep(100 * time.Millisecond) // polling published snapshots
	}
}
