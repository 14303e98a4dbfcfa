package kread

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

// txnWriter writes transactions to a one-partition topic, each record in
// its own batch (one ProduceSync at a time, uncompressed), so that a
// small fetch returns part of a transaction without its marker.
type txnWriter struct {
	t     *testing.T
	ctx   context.Context
	cl    *kgo.Client
	topic string
}

func newTxnWriter(ctx context.Context, t *testing.T, b testenv.Backend, topic string) *txnWriter {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.TransactionalID(testenv.Unique("txn")),
		kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	return &txnWriter{t: t, ctx: ctx, cl: cl, topic: topic}
}

func (w *txnWriter) begin(values ...string) {
	w.t.Helper()
	if err := w.cl.BeginTransaction(); err != nil {
		w.t.Fatal(err)
	}
	for _, v := range values {
		if err := w.cl.ProduceSync(w.ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *txnWriter) write(end kgo.TransactionEndTry, values ...string) {
	w.t.Helper()
	w.begin(values...)
	if err := w.cl.EndTransaction(w.ctx, end); err != nil {
		w.t.Fatal(err)
	}
}

// readAll reads partition 0 from the start to the stable end with fetches
// of maxBytes, failing the test on a read that does not move Next on while
// the end is ahead (a caller would loop there forever) or that moves it
// past the end.
func readAll(ctx context.Context, t *testing.T, r *Reader, maxBytes int32) (values []string, end int64) {
	t.Helper()
	for from, reads := int64(0), 0; ; reads++ {
		if reads > 100 {
			t.Fatalf("maxBytes %d: no end after %d reads; at %d", maxBytes, reads, from)
		}
		res, err := r.Read(ctx, 0, from, maxBytes)
		if err != nil {
			t.Fatalf("maxBytes %d: read at %d: %v", maxBytes, from, err)
		}
		for _, rec := range res.Records {
			if rec.Offset < from || rec.Offset >= res.Next {
				t.Fatalf("maxBytes %d: record at %d outside [%d, %d)", maxBytes, rec.Offset, from, res.Next)
			}
			values = append(values, string(rec.Value))
		}
		if res.Next > res.HighWatermark {
			t.Fatalf("maxBytes %d: Next %d past the stable end %d", maxBytes, res.Next, res.HighWatermark)
		}
		if res.Next >= res.HighWatermark {
			return values, res.Next
		}
		if res.Next <= from {
			t.Fatalf("maxBytes %d: read at %d returned %d records and Next %d below the end %d",
				maxBytes, from, len(res.Records), res.Next, res.HighWatermark)
		}
		from = res.Next
	}
}

// TestReadCommittedMovesPastAbortedOnlyFetches checks that a fetch holding
// only aborted records (their abort marker beyond it) still moves Next
// past them, and that aborted records never show, whatever the fetch size:
// kfake leaves out a response's aborted transactions when the request's
// byte limit, not the partition's, ends the fetch.
func TestReadCommittedMovesPastAbortedOnlyFetches(t *testing.T) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			topic := testenv.Unique("aborted")
			w := newTxnWriter(ctx, t, b, topic)
			w.write(kgo.TryAbort, "x", "y", "z")  // offsets 0-2, abort marker 3
			w.write(kgo.TryCommit, "a", "b", "c") // offsets 4-6, commit marker 7
			testenv.WaitStable(ctx, t, kadm.NewClient(w.cl), topic)

			reader, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Close()
			r := NewReader(reader, topic, ReadCommitted())

			// A one-byte fetch returns the first batch alone: aborted
			// data without its marker.
			res, err := r.Read(ctx, 0, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Records) != 0 || res.Next != 1 {
				t.Fatalf("first aborted batch: %d records, Next %d; want none and Next 1", len(res.Records), res.Next)
			}
			for _, maxBytes := range []int32{1, 150, 400, 1 << 20} {
				got, end := readAll(ctx, t, r, maxBytes)
				if fmt.Sprint(got) != "[a b c]" || end != 8 {
					t.Errorf("maxBytes %d: read %v to %d, want [a b c] to 8", maxBytes, got, end)
				}
			}
		})
	}
}

// TestReadCommittedStopsAtAnOpenTransaction checks that Next never passes
// the last stable offset: records of a transaction still open are neither
// returned nor skipped.
func TestReadCommittedStopsAtAnOpenTransaction(t *testing.T) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			topic := testenv.Unique("open")
			w := newTxnWriter(ctx, t, b, topic)
			w.write(kgo.TryAbort, "x", "y")  // offsets 0-1, abort marker 2
			w.write(kgo.TryCommit, "a", "b") // offsets 3-4, commit marker 5
			testenv.WaitStable(ctx, t, kadm.NewClient(w.cl), topic)
			w.begin("open-1", "open-2") // offsets 6-7, no marker yet
			defer func() { _ = w.cl.EndTransaction(context.Background(), kgo.TryAbort) }()

			reader, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Close()
			r := NewReader(reader, topic, ReadCommitted())
			for _, maxBytes := range []int32{1, 1 << 20} {
				got, end := readAll(ctx, t, r, maxBytes)
				if fmt.Sprint(got) != "[a b]" || end != 6 {
					t.Errorf("maxBytes %d: read %v to %d, want [a b] to 6", maxBytes, got, end)
				}
			}
			res, err := r.Read(ctx, 0, 6, 1<<20)
			if err != nil || len(res.Records) != 0 || res.Next != 6 {
				t.Fatalf("read at the stable end: %d records, Next %d, %v; want none and Next 6", len(res.Records), res.Next, err)
			}
		})
	}
}

func TestClampNext(t *testing.T) {
	for _, c := range []struct{ offset, processed, end, want int64 }{
		{10, 10, 20, 10}, // nothing covered
		{10, 15, 20, 15},
		{10, 25, 20, 20}, // never past the end
		{10, 5, 20, 10},  // never backwards
		{30, 35, 20, 30}, // asked past the end: stay
		{10, 15, -1, 10}, // no end known (an error response)
	} {
		if got := clampNext(c.offset, c.processed, c.end); got != c.want {
			t.Errorf("clampNext(%d, %d, %d) = %d, want %d", c.offset, c.processed, c.end, got, c.want)
		}
	}
}
