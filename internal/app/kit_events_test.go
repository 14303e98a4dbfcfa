package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/deadtopic"
)

// envelope is an order.updated event of entity at revision.
func envelope(id, tenant, entity string, revision int64) []byte {
	b, _ := json.Marshal(event.Envelope{
		ID: id, Type: "order.updated", Tenant: tenant, Entity: entity, Revision: revision,
		OccurredAt: time.Now().UTC(), Data: json.RawMessage(`{}`),
	})
	return b
}

// publishTo writes events (envelopes) to topic, each keyed by its entity.
func publishTo(t *testing.T, brokers []string, topic string, values [][]byte) {
	t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		var env event.Envelope
		if err := json.Unmarshal(v, &env); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Key: []byte(env.Entity), Value: v})
	}
	produce(t, time.Minute, recs, kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
}

// publish writes raw values, events or not, to a's events topic keyed by key.
func publish(t *testing.T, a *app.App, key string, values ...[]byte) {
	t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Key: []byte(key), Value: v})
	}
	produce(t, 30*time.Second, recs, kgo.SeedBrokers(a.Brokers()...), kgo.DefaultProduceTopic(a.Topics().Events))
}

// produce writes recs with a client of opts (brokers, topic, connection
// settings) within the given time.
func produce(t *testing.T, within time.Duration, recs []*kgo.Record, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// publishEvents writes n events over entities straight to the topic, as
// producers do, and returns the event ids each subscription must receive.
// opts are the producer's connection settings (TLS, SASL), if any.
func publishEvents(t *testing.T, a *app.App, n, entities int, subs []subscription, opts ...kgo.Opt) map[string][]string {
	t.Helper()
	expected := map[string][]string{}
	revisions := make([]int64, entities)
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		e := i % entities
		revisions[e]++
		env := event.Envelope{
			ID: fmt.Sprintf("evt-%d", i), Type: eventTypes[(i/entities)%len(eventTypes)],
			Tenant: fmt.Sprintf("tenant-%d", e%3), Entity: fmt.Sprintf("order:%d", e),
			Revision: revisions[e], OccurredAt: time.Now().UTC(), Data: json.RawMessage(`{"n":` + fmt.Sprint(i) + `}`),
		}
		value, _ := json.Marshal(env)
		recs = append(recs, &kgo.Record{Key: []byte(env.Entity), Value: value})
		for _, s := range subs {
			if s.wants(env.Tenant, env.Type) {
				expected[s.id] = append(expected[s.id], env.ID)
			}
		}
	}
	produce(t, time.Minute, recs, append([]kgo.Opt{kgo.SeedBrokers(a.Brokers()...), kgo.DefaultProduceTopic(a.Topics().Events)}, opts...)...)
	return expected
}

// readDeadLetters reads a's dead-letter topic until match has seen want
// letters or a minute passes, and returns the matching ones.
func readDeadLetters(t *testing.T, a *app.App, want int, match func(event.DeadLetter) bool) []event.DeadLetter {
	t.Helper()
	var out []event.DeadLetter
	deadtopic.Follow(t, a.Brokers(), a.Topics().Dead).Until(t, time.Minute, fmt.Sprintf("%d matching dead letters", want), func(dls []event.DeadLetter) bool {
		out = out[:0]
		for _, dl := range dls {
			if match(dl) {
				out = append(out, dl)
			}
		}
		return len(out) >= want
	})
	return out
}

// recordsIn counts the offsets topic holds (records, and transaction
// markers on a transactional topic) from its start to its end.
func recordsIn(t *testing.T, brokers []string, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("%s end offsets: %v", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("%s start offsets: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(o.Topic, o.Partition)
		n += o.Offset - s.Offset
	})
	return n
}
