package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/partition"
)

// A parked log as two earlier owners left it: the first took over at 0 and
// parked ev-live at 1; the second took over at 2; then a late append of the
// first (ev-late, stamped with epoch 0) landed at 3, after the second's
// takeover, and the second parked ev-after at 4. The stage reads the
// headers through the real parked reader: ev-live and ev-after go out,
// ev-late is stale and does not (and its skip is counted), and the stage
// takes over at 5.
func TestStageSkipsAnEarlierOwnersLateAppend(t *testing.T) {
	stageBackends(t, 1, func(t *testing.T, r *stageRig) {
		rc := newReceiver(t, func(http.ResponseWriter, *http.Request, int) {})
		r.produceParked(
			takeoverRecord(-1, 1),
			parkedRecord(t, testDelivery("ev-live", "ep_a", "x", 1), 0),
			takeoverRecord(0, 2),
			parkedRecord(t, testDelivery("ev-late", "ep_a", "y", 1), 0),
			parkedRecord(t, testDelivery("ev-after", "ep_a", "z", 1), 2),
		)
		s := r.startStage(stageOpts{endpoints: newFakeEndpoints(testEndpoint("ep_a", rc.URL("/a"))), breakers: newFakeBreakers()})
		s.waitOwned(t, 0)
		waitCond(t, time.Minute, "the commit to say ep_a finished its parked records", func() (bool, string) {
			p, err := r.committedProgress()
			if err != nil {
				return false, err.Error()
			}
			return p.NeedsFrom("ep_a") > 4, fmt.Sprintf("%+v", p)
		})
		if got := rc.delivered("/a"); len(got) != 2 || rc.answered("ev-live", http.StatusOK) != 1 || rc.answered("ev-after", http.StatusOK) != 1 {
			t.Fatalf("delivered %v, want ev-live and ev-after once each", got)
		}
		p, err := r.committedProgress()
		if err != nil {
			t.Fatal(err)
		}
		if p.Takeover != 6 {
			t.Fatalf("the commit names the takeover %d, want 6 (one past the stage's own, at 5)", p.Takeover)
		}
		if n := s.counter(t, "laneway_parked_stale_skipped_total"); n < 1 {
			t.Fatalf("laneway_parked_stale_skipped_total is %v, want the skip of ev-late counted", n)
		}
	})
}

func takeoverRecord(prev, generation int64) *kgo.Record {
	return &kgo.Record{Headers: []kgo.RecordHeader{
		{Key: partition.TakeoverHeader, Value: []byte(strconv.FormatInt(prev, 10))},
		{Key: partition.GenerationHeader, Value: []byte(strconv.FormatInt(generation, 10))},
	}}
}

// parkedRecord is d parked by the owner of epoch (its deliveries offset
// lies beyond the partition's end: no replay meets it).
func parkedRecord(t *testing.T, d event.Delivery, epoch int64) *kgo.Record {
	t.Helper()
	value, err := json.Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Key: []byte(d.EndpointID), Value: value, Headers: []kgo.RecordHeader{
		{Key: partition.SrcHeader, Value: []byte("1000000")},
		{Key: partition.EpochHeader, Value: []byte(strconv.FormatInt(epoch, 10))},
	}}
}

// produceParked writes recs to partition 0 of the parked topic, in order.
func (r *stageRig) produceParked(recs ...*kgo.Record) {
	r.t.Helper()
	for _, rec := range recs {
		rec.Topic, rec.Partition = r.tops.Parked, 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		r.t.Fatalf("produce parked records: %v", err)
	}
}
