package deadtopic_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/deadtopic"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestReader writes dead letters as Laneway does: plain ones, then one in
// an aborted transaction (never read) and one in a committed transaction,
// both ending in a marker that Written must read past. Until then reads on
// to a letter written after it started.
func TestReader(t *testing.T) {
	const topic = "laneway.dead"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	if got := deadtopic.Read(t, brokers, topic); len(got) != 0 {
		t.Fatalf("an empty topic: %s", deadtopic.Describe(got))
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain := producer(t, brokers, topic)
	if err := plain.ProduceSync(ctx, letter(0), letter(1), letter(2)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txn := producer(t, brokers, topic, kgo.TransactionalID("dead-txn"))
	for i, end := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, letter(98+i)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitStable(ctx, t, kadm.NewClient(plain), topic)

	r := deadtopic.Follow(t, brokers, topic)
	if got := ids(r.Written(t)); len(got) != 4 || !got["0"] || !got["1"] || !got["2"] || !got["99"] {
		t.Fatalf("read %v, want 0, 1, 2 and 99 (98 was aborted)", got)
	}
	produced := make(chan error, 1)
	go func() { produced <- plain.ProduceSync(ctx, letter(3)).FirstErr() }()
	got := r.Until(t, 30*time.Second, "letter 3", func(ls []event.DeadLetter) bool { return ids(ls)["3"] })
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || ids(got)["98"] {
		t.Fatalf("read %s, want 0 to 3 and 99", deadtopic.Describe(got))
	}
}

func producer(t *testing.T, brokers []string, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// letter is dead letter i, keyed by its id (so spread over partitions).
func letter(i int) *kgo.Record {
	id := strconv.Itoa(i)
	v, _ := json.Marshal(event.DeadLetter{ID: id, Reason: event.ReasonMaxAttempts, EndpointID: "A"})
	return &kgo.Record{Key: []byte(id), Value: v}
}

func ids(letters []event.DeadLetter) map[string]bool {
	out := map[string]bool{}
	for _, l := range letters {
		out[l.ID] = true
	}
	return out
}
