package engine

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/event"
)

// bigDelivery is a delivery carrying about size bytes of data.
func bigDelivery(eventID, endpointID, entity string, size int) event.Delivery {
	d := testDelivery(eventID, endpointID, entity, 1)
	d.Data = json.RawMessage(`{"pad":"` + strings.Repeat("x", size) + `"}`)
	return d
}

// heldReceiver holds every request until release is called (the test
// registers it after starting its stage, so it runs before the stop).
func heldReceiver(t *testing.T) (rc *receiver, release func()) {
	ch := make(chan struct{})
	rc = newReceiver(t, func(http.ResponseWriter, *http.Request, int) { <-ch })
	return rc, func() { close(ch) }
}

// A lane parks when the bytes it holds pass LaneBytes, long before its
// count of deliveries reaches LaneBuffer: large payloads must not fill
// memory first (issue #15).
func TestLaneParksWhenItsBytesPassTheBudget(t *testing.T) {
	r := kfakeStageRig(t, 1)
	rc, release := heldReceiver(t)
	ep := testEndpoint("ep_big", rc.URL("/big"))
	ep.MaxConcurrency = 1
	events := newEventLog()
	s := r.startStage(stageOpts{endpoints: newFakeEndpoints(ep), breakers: newFakeBreakers(), tweak: func(c *DeliveryConfig) {
		c.LaneBytes = 16 << 10
		c.OnEvent = events.Add
	}})
	t.Cleanup(release)
	s.waitOwned(t, 0)
	for i := range 40 {
		r.produce(0, bigDelivery(fmt.Sprint("ev", i), "ep_big", fmt.Sprint("e", i), 1<<10))
	}
	parked := events.Wait(t, time.Minute, "ep_big's lane parked", func(e Event) bool { return e.Kind == EventLaneParked })
	if parked.Endpoint != "ep_big" || parked.Reason != "lane_bytes" {
		t.Fatalf("parked %+v, want ep_big for lane_bytes", parked)
	}
	r.waitParked(t, "ep_big", 20)
}

// Lanes each within LaneBytes but together above InstanceBytes: the
// largest is parked, by the instance's budget. The small lane's whole
// backlog (12 deliveries of about 0.6 KiB) stays under a third of the
// budget, so whatever order the two partitions are fetched in, the large
// lane is the larger whenever the budget is passed (with 1 KiB deliveries
// a small lane fetched whole before the large one's first records was the
// larger, and was rightly parked: CI saw it).
func TestInstanceBytesParkTheLargestLane(t *testing.T) {
	r := kfakeStageRig(t, 2)
	rc, release := heldReceiver(t)
	small, large := testEndpoint("ep_small", rc.URL("/small")), testEndpoint("ep_large", rc.URL("/large"))
	small.MaxConcurrency, large.MaxConcurrency = 1, 1
	events := newEventLog()
	s := r.startStage(stageOpts{endpoints: newFakeEndpoints(small, large), breakers: newFakeBreakers(), tweak: func(c *DeliveryConfig) {
		c.InstanceBytes = 24 << 10
		c.OnEvent = events.Add
	}})
	t.Cleanup(release)
	s.waitOwned(t, 0)
	s.waitOwned(t, 1)
	for i := range 12 {
		r.produce(0, bigDelivery(fmt.Sprint("s", i), "ep_small", fmt.Sprint("e", i), 256))
		r.produce(1, bigDelivery(fmt.Sprint("l", i), "ep_large", fmt.Sprint("e", i), 2<<10))
	}
	parked := events.Wait(t, time.Minute, "a lane parked", func(e Event) bool { return e.Kind == EventLaneParked })
	if parked.Endpoint != "ep_large" || parked.Reason != "instance_bytes" {
		t.Fatalf("parked %+v, want ep_large for instance_bytes", parked)
	}
	r.waitParked(t, "ep_large", 5)
	waitCond(t, 30*time.Second, "the small endpoint's first request", func() (bool, string) {
		return len(rc.requests()) >= 2, fmt.Sprint(rc.requests())
	})
	for _, rec := range r.readAll(r.tops.Parked) {
		if string(rec.Key) == "ep_small" {
			t.Fatalf("the smaller lane was parked too: %s", rec.Value)
		}
	}
}
