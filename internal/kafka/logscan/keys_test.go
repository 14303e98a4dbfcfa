package logscan

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

// The partitions KeyPartitions names are those a default producer writes
// the keys to: a keyed search must find what was written.
func TestKeyPartitionsMatchTheProducer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := testenv.Kfake(t)
	topic := testenv.Unique("keys")
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 6, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	keys := NewKeyPartitions(adm, topic)
	var want []int32
	for _, k := range []string{"a", "b", "a", "c", "b", "d"} {
		r := &kgo.Record{Key: []byte(k)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(want, r.Partition) {
			want = append(want, r.Partition)
		}
	}
	got, err := keys.Of(ctx, "a", "b", "a", "c", "b", "d")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("partitions %v, the producer wrote to %v", got, want)
	}
	if _, err := NewKeyPartitions(adm, topic+"-missing").Of(ctx, "a"); err == nil {
		t.Fatal("no error for a missing topic")
	}
}
