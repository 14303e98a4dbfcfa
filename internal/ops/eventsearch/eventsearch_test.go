package eventsearch

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestNarrowWindowReadsASmallFraction publishes 100,000 events spread over
// about 70 days (one a minute) across 8 partitions and asks for one hour of
// one tenant: exactly the right events come back, and the search examines
// only the records of that hour, a tiny fraction of the topic.
func TestNarrowWindowReadsASmallFraction(t *testing.T) {
	b := testenv.Kfake(t)
	if real, ok := testenv.RealKafka(); ok {
		b = real
	}
	topic := testenv.Unique("events")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(16<<10)) // batches as many small producers would make, not one megabyte each
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The records are stamped months in the past.
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 8, -1, testenv.KeepForever(), topic); err != nil {
		t.Fatal(err)
	}
	const total = 100_000
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]*kgo.Record, 0, total)
	for i := range total {
		tenant := []string{"acme", "globex"}[i%2]
		env := event.Envelope{ID: fmt.Sprintf("ev-%d", i), Type: "order.updated", Tenant: tenant,
			Entity: fmt.Sprintf("order:%d", i%500), Revision: int64(i), OccurredAt: start}
		v, _ := json.Marshal(env)
		recs = append(recs, &kgo.Record{Key: []byte(env.Entity), Value: v, Timestamp: start.Add(time.Duration(i) * time.Minute)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	reader, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	f := New(reader, topic)
	since := start.Add(50_000 * time.Minute)
	until := since.Add(59 * time.Minute) // inclusive: 60 minutes, 60 events, 30 of acme
	var got []string
	cursor := ""
	for {
		page, err := f.Find(ctx, Filter{Tenant: "acme", Since: since, Until: until}, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Items {
			if e.Tenant != "acme" || e.AcceptedAt.Before(since) || e.AcceptedAt.After(until) {
				t.Fatalf("event outside the filter: %+v", e)
			}
			got = append(got, e.ID)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	want := map[string]bool{}
	for i := 50_000; i < 50_060; i += 2 {
		want[fmt.Sprintf("ev-%d", i)] = true
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d: %v", len(got), len(want), got)
	}
	for _, id := range got {
		if !want[id] {
			t.Fatalf("unexpected event %s", id)
		}
	}
	if scanned := f.Scanned(); scanned > 60 {
		t.Fatalf("examined %d of %d records for a 60-record window", scanned, total)
	}
	// Kafka returns whole batches, and each page fetches from its cursor
	// again, so more is fetched than examined; still a small fraction.
	if fetched := f.Fetched(); fetched > total/10 {
		t.Fatalf("fetched %d of %d records for a 60-record window", fetched, total)
	}
	t.Logf("examined %d, fetched %d of %d records (%.2f%%)", f.Scanned(), f.Fetched(), total, 100*float64(f.Fetched())/total)
}
