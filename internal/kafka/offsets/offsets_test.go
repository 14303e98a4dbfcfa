package offsets_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/offsets"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestCommittedOrStartCommitAndBounds: a group that never committed reads
// the log start (records below it deleted), a commit is read back with
// no metadata, and the bounds are the partition's start and end; a topic
// not created yet has no bounds.
func TestCommittedOrStartCommitAndBounds(t *testing.T) {
	backends := testenv.Kafkas(t)
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			topic, group := testenv.Unique("offsets"), testenv.Unique("offsets-group")
			adm := seeded(ctx, t, b, topic, 10)
			if _, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 4}}}); err != nil {
				t.Fatal(err)
			}
			at, meta, err := offsets.CommittedOrStart(ctx, adm, group, topic, 0)
			if err != nil || at != 4 || meta != "" {
				t.Errorf("before a commit: %d %q %v, want the log start 4", at, meta, err)
			}
			if err := offsets.Commit(ctx, adm, group, topic, 0, 7); err != nil {
				t.Fatal(err)
			}
			if at, _, err = offsets.CommittedOrStart(ctx, adm, group, topic, 0); err != nil || at != 7 {
				t.Errorf("after committing 7: %d %v", at, err)
			}
			start, end, ok, err := offsets.Bounds(ctx, adm, topic, 0)
			if err != nil || !ok || start.Offset != 4 || end.Offset != 10 {
				t.Errorf("bounds %d..%d ok %v err %v, want 4..10", start.Offset, end.Offset, ok, err)
			}
			start, _, ok, err = offsets.Bounds(ctx, adm, testenv.Unique("offsets-missing"), 0)
			if err != nil || ok && !errors.Is(start.Err, kerr.UnknownTopicOrPartition) {
				t.Errorf("bounds of a missing topic: ok %v, start err %v, err %v; want not ok or UnknownTopicOrPartition", ok, start.Err, err)
			}
		})
	}
}

// seeded creates topic with one partition holding n records.
func seeded(ctx context.Context, t *testing.T, b testenv.Backend, topic string, n int) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, -1, testenv.KeepForever(), topic); err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Value: []byte("v")}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return adm
}
