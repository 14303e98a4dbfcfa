package engine

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/partition"
)

// One paused endpoint holds the parked partition's lowest needed offset
// for as long as it stays paused. Another endpoint of the partition that
// parked after it, and drained, must not be delivered its finished parked
// history again by the next owner (issue #13, item 5): the parked progress
// is kept per endpoint, in the deliveries commit.
func TestNextOwnerSkipsAnotherEndpointsFinishedParkedHistory(t *testing.T) {
	stageBackends(t, 1, func(t *testing.T, r *stageRig) {
		release := make(chan struct{})
		rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, n int) {
			if n == 0 {
				<-release // the first request holds, so ep_b's lane waits and parks
			}
		})
		paused := testEndpoint("ep_paused", rc.URL("/paused"))
		paused.Paused = true
		slow := testEndpoint("ep_b", rc.URL("/b"))
		slow.MaxConcurrency = 1
		eps := newFakeEndpoints(paused, slow)
		opts := stageOpts{endpoints: eps, breakers: newFakeBreakers(), tweak: func(c *DeliveryConfig) {
			c.ParkAfter = 300 * time.Millisecond
		}}
		first := r.startStage(opts)
		first.waitOwned(t, 0)

		for i := range 3 {
			r.produce(0, testDelivery(fmt.Sprintf("evp%d", i), "ep_paused", fmt.Sprintf("p%d", i), 1))
		}
		r.waitParked(t, "ep_paused", 3)
		const n = 8
		for i := range n {
			r.produce(0, testDelivery(fmt.Sprintf("evb%d", i), "ep_b", fmt.Sprintf("b%d", i), 1))
		}
		r.waitParked(t, "ep_b", n-1) // all but the one held in flight (plus its parked copy, maybe)
		close(release)
		waitCond(t, time.Minute, "ep_b's deliveries all answered 200", func() (bool, string) {
			got := rc.delivered("/b")
			return len(got) == n, fmt.Sprint(got)
		})
		waitCond(t, time.Minute, "the commit to say ep_b finished its parked records", func() (bool, string) {
			p, err := r.committedProgress()
			if err != nil {
				return false, err.Error()
			}
			return p.NeedsFrom("ep_b") > r.lastParked("ep_b"), fmt.Sprintf("%+v", p)
		})
		first.stop()

		second := r.startStage(opts)
		second.waitOwned(t, 0)
		// A delivery after the handover: were ep_b's parked history read
		// again, it would queue behind it (concurrency 1, parked order).
		r.produce(0, testDelivery("evb-after", "ep_b", "b-after", 1))
		waitCond(t, time.Minute, "the new delivery of ep_b", func() (bool, string) {
			return rc.answered("evb-after", http.StatusOK) > 0, fmt.Sprint(rc.delivered("/b"))
		})
		if got := rc.delivered("/b"); len(got) != n+1 {
			t.Fatalf("ep_b was delivered %d times, want %d (its %d parked deliveries once, then the new one): %v", len(got), n+1, n, got)
		}
		if got := rc.delivered("/paused"); len(got) != 0 {
			t.Fatalf("the paused endpoint got %v", got)
		}
	})
}

// delivered returns the ids of the requests to path answered 200, in order.
func (rc *receiver) delivered(path string) []string {
	var ids []string
	for _, rq := range rc.requests() {
		if rq.Path == path && rq.Answered(http.StatusOK) {
			ids = append(ids, rq.MsgID)
		}
	}
	return ids
}

// lastParked is the offset of endpointID's last parked record.
func (r *stageRig) lastParked(endpointID string) int64 {
	last := int64(-1)
	for _, rec := range r.readAll(r.tops.Parked) {
		if string(rec.Key) == endpointID {
			last = max(last, rec.Offset)
		}
	}
	return last
}

// waitParked waits until the parked partition holds at least n records of
// endpointID.
func (r *stageRig) waitParked(t *testing.T, endpointID string, n int) {
	t.Helper()
	waitCond(t, time.Minute, fmt.Sprintf("%d parked records of %s", n, endpointID), func() (bool, string) {
		got := 0
		for _, rec := range r.readAll(r.tops.Parked) {
			if _, marker := endMarkerOf(rec); !marker && string(rec.Key) == endpointID {
				got++
			}
		}
		return got >= n, fmt.Sprintf("%d", got)
	})
}

func endMarkerOf(rec *kgo.Record) (string, bool) {
	for _, h := range rec.Headers {
		if h.Key == partition.EndHeader {
			return string(h.Value), true
		}
	}
	return "", false
}

// committedProgress reads the parked progress in the deliveries commit of
// partition 0.
func (r *stageRig) committedProgress() (partition.ParkedProgress, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.adm.FetchOffsets(ctx, r.group)
	if err != nil {
		return partition.ParkedProgress{}, err
	}
	o, ok := resp.Lookup(r.tops.Deliveries, 0)
	if !ok {
		return partition.ParkedProgress{}, fmt.Errorf("no commit yet")
	}
	return partition.DecodeProgress(o.Metadata)
}
