package inbound

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestOutcomeReadsPastAbortedVerifyTransactions checks that Outcome finds a
// capture's outcome behind more than a fetch of aborted verify
// transactions: a fetch of only those returns no records, and the search
// must go on from where it ended rather than stop there.
func TestOutcomeReadsPastAbortedVerifyTransactions(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		topic, group := testenv.Unique("inb-outcome"), testenv.Unique("inb-verify")
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.TransactionalID(testenv.Unique("inb-txn")),
			kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		if _, err := adm.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
			t.Fatal(err)
		}
		id := writeCapture(ctx, t, b, topic)
		// 12 rejections of about 100 KiB, aborted: more than one 1 MiB
		// fetch, each record a batch of its own.
		aborted := make([]*kgo.Record, 12)
		for i := range aborted {
			aborted[i] = outcomeRecord(topic, 0, &Item{ID: id, Source: "src", Status: StatusRejected, Detail: strings.Repeat("r", 100<<10)}, time.Now())
		}
		writeTxn(ctx, t, cl, kgo.TryAbort, aborted)
		writeTxn(ctx, t, cl, kgo.TryCommit, []*kgo.Record{outcomeRecord(topic, 0, &Item{ID: id, Source: "src", Status: StatusVerified}, time.Now())})
		testenv.WaitStable(ctx, t, adm, topic)
		// The verify group has consumed the capture.
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, group, offs); err != nil {
			t.Fatal(err)
		}

		reader, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
		if err != nil {
			t.Fatal(err)
		}
		defer reader.Close()
		it, ok, err := newFinder(reader, topic, group).Outcome(ctx, &Capture{ID: id, Source: "src"})
		if err != nil || !ok || it.Status != StatusVerified {
			t.Fatalf("outcome of %s: %+v, found %v, %v; want the committed verified outcome", id, it, ok, err)
		}
	})
}

// writeCapture writes one capture record, outside any transaction as the
// front door does, at offset 0, and returns its id.
func writeCapture(ctx context.Context, t *testing.T, b testenv.Backend, topic string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rec := &kgo.Record{Key: []byte("src"), Value: []byte("{}"), Headers: []kgo.RecordHeader{{Key: hdrKind, Value: []byte(kindCapture)}}}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return RequestID(rec.Partition, rec.Offset)
}

// writeTxn writes recs in one transaction, one at a time so that each is a
// batch of its own.
func writeTxn(ctx context.Context, t *testing.T, cl *kgo.Client, end kgo.TransactionEndTry, recs []*kgo.Record) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		t.Fatal(err)
	}
}
