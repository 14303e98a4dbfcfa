package testenv

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RawRecords reads partition 0 of topic from its start to its current end
// with a plain consumer, as anyone who can reach the brokers could: tests
// use it to look at what a store really wrote.
func RawRecords(ctx context.Context, t testing.TB, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offset of %s: %v", topic, err)
	}
	end, _ := ends.Lookup(topic, 0)
	var out []*kgo.Record
	for len(out) == 0 || out[len(out)-1].Offset+1 < end.Offset {
		if end.Offset == 0 {
			return nil
		}
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s up to offset %d: %v", topic, end.Offset, ctx.Err())
		}
		out = append(out, fetches.Records()...)
	}
	return out
}
