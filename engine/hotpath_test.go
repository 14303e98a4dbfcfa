package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/partition"
)

// hotPath runs deliveries through the delivery stage's own work per
// delivery, without Kafka or a network: decoding the record, the owner,
// the driver's effects and attempt goroutines, rendering the body once
// and signing it. The HTTP client's share is deliver's BenchmarkSend.
type hotPath struct {
	d      *driven
	values [][]byte // record values, one per (endpoint, entity), reused round after round
	next   int64    // the next offset
	sent   atomic.Int64
}

// signingSender signs each request as the real Sender does, and answers
// 200 at once.
type signingSender struct{ sent *atomic.Int64 }

func (s signingSender) Send(_ context.Context, r deliver.Request) deliver.Result {
	r.Signer.SetHeaders(http.Header{}, r.MsgID, r.Timestamp, r.Body)
	s.sent.Add(1)
	return deliver.Result{StatusCode: http.StatusOK}
}

func newHotPath(tb testing.TB, endpoints, entities int) *hotPath {
	tb.Helper()
	h := &hotPath{}
	var eps []endpoint.Endpoint
	for i := range endpoints {
		ep := testEndpoint(fmt.Sprintf("ep_%02d", i), "http://127.0.0.1:1/hook")
		ep.MaxConcurrency = 16
		eps = append(eps, ep)
	}
	cfg := DeliveryConfig{Endpoints: newFakeEndpoints(eps...), Sender: signingSender{&h.sent},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := cfg.setDefaults(); err != nil {
		tb.Fatal(err)
	}
	s := &DeliveryStage{cfg: cfg, parts: map[int32]*driven{}, slots: partition.NewSlotPool(cfg.MaxInFlight, cfg.Now)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	tb.Cleanup(s.cancel)
	d, err := newDriven(s, 0, nil) // its produces are answered by hand
	if err != nil {
		tb.Fatal(err)
	}
	// Assignment with an empty parked partition, answered by hand: the
	// scan finds it empty, the takeover record lands at offset 0, the scan
	// reads it.
	d.owner.Assign(partition.Assignment{})
	d.owner.ReadDone(d.fx.take().reads[0], partition.ReadResult{}, nil)
	takeover := d.fx.take().appends[0]
	d.owner.Appended(takeover, 0, nil)
	rec := *takeover.Record
	d.owner.ReadDone(d.fx.take().reads[0], partition.ReadResult{Records: []*kgo.Record{&rec}, End: 1, Next: 1}, nil)
	d.fx.take()
	h.d = d
	for i := range entities {
		dl := testDelivery(fmt.Sprint("ev", i), eps[i%endpoints].ID, fmt.Sprint("order:", i), 1)
		dl.Coalesce = true
		v, err := json.Marshal(&dl)
		if err != nil {
			tb.Fatal(err)
		}
		h.values = append(h.values, v)
	}
	return h
}

// round delivers n records, fetched as one batch, and waits until every
// attempt has completed.
func (h *hotPath) round(n int) {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Partition: 0, Offset: h.next, Value: h.values[int(h.next)%len(h.values)]}
		h.next++
	}
	h.d.dispatch(kgo.FetchPartition{Partition: 0, Records: recs, HighWatermark: h.next})
	h.d.s.background.Wait() // every attempt goroutine ends after its AttemptDone
}

// BenchmarkDeliveryHotPath reports the delivery stage's CPU and
// allocations per delivery (one op = one delivery), for 50 endpoints and
// 10,000 entities as laneway-bench's default scenario.
func BenchmarkDeliveryHotPath(b *testing.B) {
	h := newHotPath(b, 50, 10000)
	h.round(1000) // warm: lanes, signer cache
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += 500 {
		h.round(min(500, b.N-done))
	}
}

// maxAllocsPerDelivery is the hot path's allocation budget: a regression
// shows up in review as this test failing, not as a slower benchmark.
const maxAllocsPerDelivery = 60

func TestDeliveryHotPathAllocations(t *testing.T) {
	h := newHotPath(t, 50, 10000)
	h.round(1000)
	const batch = 1000
	perDelivery := testing.AllocsPerRun(5, func() { h.round(batch) }) / batch
	t.Logf("%.1f allocations per delivery (budget %d)", perDelivery, maxAllocsPerDelivery)
	if perDelivery > maxAllocsPerDelivery {
		t.Fatalf("%.1f allocations per delivery, above the budget of %d: see BenchmarkDeliveryHotPath", perDelivery, maxAllocsPerDelivery)
	}
	if got, want := h.sent.Load(), int64(1000+6*batch); got != want {
		t.Fatalf("%d attempts sent, want %d", got, want)
	}
}
