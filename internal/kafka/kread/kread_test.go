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

// TestOffsetReaderReadsFromAnyOffset checks the parked backlog's random
// access read against kfake and, when configured, the real broker.
func TestOffsetReaderReadsFromAnyOffset(t *testing.T) {
	backends := testenv.Kafkas(t)
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			topic := testenv.Unique("reader")
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, -1, nil, topic); err != nil {
				t.Fatal(err)
			}
			var recs []*kgo.Record
			for i := range 500 {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Key: []byte("k"), Value: []byte(fmt.Sprint(i))})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			r := NewReader(cl, topic)
			for _, from := range []int64{0, 137, 499} {
				res, err := r.Read(ctx, 1, from, 1<<20)
				if err != nil {
					t.Fatalf("read from %d: %v", from, err)
				}
				if len(res.Records) == 0 || res.Records[0].Offset != from || string(res.Records[0].Value) != fmt.Sprint(from) {
					t.Fatalf("read from %d returned %d records, first %+v", from, len(res.Records), res.Records)
				}
				if res.HighWatermark != 500 {
					t.Errorf("high watermark %d, want 500", res.HighWatermark)
				}
			}
			res, err := r.Read(ctx, 1, 500, 1<<20)
			if err != nil || len(res.Records) != 0 {
				t.Errorf("read at the end: %d records, %v", len(res.Records), err)
			}
		})
	}
}

// TestReadCommittedSkipsAbortedAndMarkers checks that a ReadCommitted reader
// returns only committed records and that Next moves past aborted records
// and transaction markers, so a scan never stalls on them.
func TestReadCommittedSkipsAbortedAndMarkers(t *testing.T) {
	backends := testenv.Kafkas(t)
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			topic := testenv.Unique("committed")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.TransactionalID(testenv.Unique("txn")),
				kgo.DefaultProduceTopic(topic))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
				t.Fatal(err)
			}
			writeTxn := func(commit kgo.TransactionEndTry, values ...string) {
				if err := cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				for _, v := range values {
					if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
				if err := cl.EndTransaction(ctx, commit); err != nil {
					t.Fatal(err)
				}
			}
			writeTxn(kgo.TryCommit, "a", "b")
			writeTxn(kgo.TryAbort, "x", "y", "z")
			writeTxn(kgo.TryCommit, "c")
			testenv.WaitStable(ctx, t, kadm.NewClient(cl), topic)

			reader, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Close()
			r := NewReader(reader, topic, ReadCommitted())
			var got []string
			for next, reads := int64(0), 0; ; reads++ {
				if reads > 50 {
					t.Fatalf("scan did not reach the end; at %d", next)
				}
				res, err := r.Read(ctx, 0, next, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				for _, rec := range res.Records {
					got = append(got, string(rec.Value))
				}
				if res.Next >= res.HighWatermark {
					break
				}
				if res.Next <= next && len(res.Records) == 0 {
					continue // the end is not stable yet; read again
				}
				next = res.Next
			}
			if fmt.Sprint(got) != "[a b c]" {
				t.Fatalf("read committed returned %v, want [a b c]", got)
			}
		})
	}
}
