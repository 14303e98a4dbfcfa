package engine

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// The instance's cap on attempts in flight (MaxInFlight) lower than the sum
// of the endpoints' limits: a slow endpoint holds at most its own
// max_concurrency, and a healthy one still delivers everything with the
// slots left, never more than the cap in flight at once (issue #15).
func TestMaxInFlightKeepsIsolationWhenItBinds(t *testing.T) {
	r := kfakeStageRig(t, 2)
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight, peak := map[string]int{}, map[string]int{}
	total, peakTotal := 0, 0
	rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
		mu.Lock()
		inFlight[req.URL.Path]++
		total++
		peak[req.URL.Path] = max(peak[req.URL.Path], inFlight[req.URL.Path])
		peakTotal = max(peakTotal, total)
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight[req.URL.Path]--
			total--
			mu.Unlock()
		}()
		if req.URL.Path == "/slow" {
			<-release
			return
		}
		time.Sleep(5 * time.Millisecond) // a receiver's work, so attempts overlap
	})
	slow, healthy := testEndpoint("ep_slow", rc.URL("/slow")), testEndpoint("ep_healthy", rc.URL("/healthy"))
	slow.MaxConcurrency, healthy.MaxConcurrency = 3, 10
	s := r.startStage(stageOpts{endpoints: newFakeEndpoints(slow, healthy), breakers: newFakeBreakers(), tweak: func(c *DeliveryConfig) {
		c.MaxInFlight = 6
	}})
	t.Cleanup(func() { close(release) })
	s.waitOwned(t, 0)
	s.waitOwned(t, 1)
	for i := range 10 {
		r.produce(0, testDelivery(fmt.Sprint("s", i), "ep_slow", fmt.Sprint("e", i), 1))
	}
	waitCond(t, 30*time.Second, "the slow endpoint to hold its limit", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return inFlight["/slow"] == 3, fmt.Sprint(inFlight)
	})
	const n = 60
	for i := range n {
		r.produce(1, testDelivery(fmt.Sprint("h", i), "ep_healthy", fmt.Sprint("e", i), 1))
	}
	waitCond(t, time.Minute, "every healthy delivery", func() (bool, string) {
		got := len(rc.delivered("/healthy"))
		return got == n, fmt.Sprint(got)
	})
	mu.Lock()
	defer mu.Unlock()
	if peak["/slow"] > 3 || peakTotal > 6 {
		t.Fatalf("peaks: slow %d (limit 3), all %d (cap 6)", peak["/slow"], peakTotal)
	}
	if peak["/healthy"] < 2 {
		t.Fatalf("the healthy endpoint never had two attempts at once (peak %d): it did not share the free slots", peak["/healthy"])
	}
}
