package deadtopic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
	b := testenv.Kfake(t)
	topic := testenv.Unique("dead")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	letter := func(i int) *kgo.Record {
		v, _ := json.Marshal(event.DeadLetter{ID: fmt.Sprint(i), Reason: event.ReasonMaxAttempts, EndpointID: "A"})
		return &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: v}
	}
	if got := deadtopic.Read(t, b.Brokers, topic); len(got) != 0 {
		t.Fatalf("an empty topic: %s", deadtopic.Describe(got))
	}
	if err := cl.ProduceSync(ctx, letter(0), letter(1), letter(2)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(testenv.Unique("dead-txn")))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
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
	testenv.WaitStable(ctx, t, kadm.NewClient(cl), topic)

	r := deadtopic.Follow(t, b.Brokers, topic)
	ids := func(ls []event.DeadLetter) map[string]bool {
		out := map[string]bool{}
		for _, l := range ls {
			out[l.ID] = true
		}
		return out
	}
	if got := ids(r.Written(t)); len(got) != 4 || !got["0"] || !got["1"] || !got["2"] || !got["99"] {
		t.Fatalf("read %v, want 0, 1, 2 and 99 (98 was aborted)", got)
	}
	produced := make(chan error, 1)
	go func() { produced <- cl.ProduceSync(ctx, letter(3)).FirstErr() }()
	got := r.Until(t, 30*time.Second, "letter 3", func(ls []event.DeadLetter) bool { return ids(ls)["3"] })
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || ids(got)["98"] {
		t.Fatalf("read %s, want 0 to 3 and 99", deadtopic.Describe(got))
	}
}
