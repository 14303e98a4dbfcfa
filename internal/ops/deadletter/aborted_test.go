package deadletter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestFindEndsPastAbortedLetters checks that a search whose range starts
// with an aborted transaction bigger than one fetch ends, and shows only
// the committed letters. Each fetch of the aborted part holds aborted
// records and no marker: read-committed, it returns nothing, and a search
// that did not move past it would read the same offset for ever.
func TestFindEndsPastAbortedLetters(t *testing.T) {
	backends := testenv.Kafkas(t)
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			topic := testenv.Unique("dead-aborted")
			w := newLetterWriter(ctx, t, b, topic)
			// 40 letters of about 2 KiB each, far more than one of the
			// search's fetches (16 KiB to 1 MiB, sized to the page).
			w.write(kgo.TryAbort, letters("aborted", 40, 2<<10))
			w.write(kgo.TryCommit, letters("kept", 5, 0))
			testenv.WaitStable(ctx, t, kadm.NewClient(w.cl), topic)

			reader, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Close()
			got := findAll(ctx, t, NewFinder(reader, topic), Filter{EndpointID: "ep_a"}, 3)
			if fmt.Sprint(got) != "[kept-0 kept-1 kept-2 kept-3 kept-4]" {
				t.Fatalf("found %v, want the 5 committed letters", got)
			}
		})
	}
}

// findAll pages through a search to its end, failing the test if it has
// not ended by ctx's deadline.
func findAll(ctx context.Context, t *testing.T, f *Finder, filter Filter, limit int) []string {
	t.Helper()
	var ids []string
	for cursor, pages := "", 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("search not ended after %d pages; found %v", pages, ids)
		}
		page, err := f.Find(ctx, filter, cursor, limit)
		if err != nil {
			t.Fatalf("page %d: %v (found %v)", pages, err, ids)
		}
		for _, l := range page.Items {
			ids = append(ids, l.Delivery.EventID)
		}
		if cursor = page.Next; cursor == "" {
			return ids
		}
	}
}

// letters makes n dead letters of endpoint ep_a whose event ids are
// prefix-0, prefix-1, ..., each padded by pad bytes of detail.
func letters(prefix string, n, pad int) []*kgo.Record {
	var recs []*kgo.Record
	for i := range n {
		d := &event.Delivery{EventID: fmt.Sprintf("%s-%d", prefix, i), EndpointID: "ep_a", Entity: "ent", Type: "t", Tenant: "acme"}
		l := event.DeadLetter{
			ID: d.EventID + ":ep_a", Reason: event.ReasonMaxAttempts, Detail: strings.Repeat("d", pad),
			DeadAt: t0, EndpointID: "ep_a", Delivery: d,
		}
		raw, _ := json.Marshal(l)
		recs = append(recs, &kgo.Record{Key: []byte("ep_a"), Value: raw, Timestamp: t0})
	}
	return recs
}

// letterWriter writes transactions to a one-partition dead topic,
// uncompressed so that the records' sizes are the fetches' sizes.
type letterWriter struct {
	t   *testing.T
	ctx context.Context
	cl  *kgo.Client
}

func newLetterWriter(ctx context.Context, t *testing.T, b testenv.Backend, topic string) *letterWriter {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.TransactionalID(testenv.Unique("dead-txn")),
		kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, testenv.KeepForever(), topic); err != nil {
		t.Fatal(err)
	}
	return &letterWriter{t: t, ctx: ctx, cl: cl}
}

// write writes recs in one transaction, one at a time so that each is a
// batch of its own.
func (w *letterWriter) write(end kgo.TransactionEndTry, recs []*kgo.Record) {
	w.t.Helper()
	if err := w.cl.BeginTransaction(); err != nil {
		w.t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.cl.ProduceSync(w.ctx, r).FirstErr(); err != nil {
			w.t.Fatal(err)
		}
	}
	if err := w.cl.EndTransaction(w.ctx, end); err != nil {
		w.t.Fatal(err)
	}
}
