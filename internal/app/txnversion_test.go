package app_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestFanoutTransactionProtocol checks which Kafka transaction protocol the
// fan-out speaks. Under version 2 (KIP-890 part 2) every commit bumps the
// producer epoch; under version 1 the epoch stays where InitProducerId put
// it. By default the fan-out must stay on version 1 even though the cluster
// (kfake, Kafka 4.4) has finalised version 2; with KafkaTransactionV2 it
// moves to version 2, which shows the check can tell them apart.
func TestFanoutTransactionProtocol(t *testing.T) {
	backends := testenv.Kafkas(t)
	const batches = 6
	for _, b := range backends {
		for _, v2 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/v2=%t", b.Name, v2), func(t *testing.T) {
				f, a, api := scenario(t, b, func(c *app.Config) { c.KafkaTransactionV2 = v2 })
				ep := api.createEndpoint(map[string]any{"tenant": "txn", "url": f.URL(0)})
				f.Add(0, ep.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusNoContent) })
				// One batch at a time, each delivered before the next is
				// published: every batch is a fan-out transaction of its own.
				for i := range batches {
					publishTo(t, a.Brokers(), a.Topics().Events, [][]byte{envelope(fmt.Sprintf("txn-%d", i), "txn", "order:1", int64(i+1))})
					waitUntil(t, f, time.Minute, fmt.Sprintf("delivery %d", i+1), func() bool { return f.Total() >= int64(i+1) })
				}
				epoch := fanoutEpoch(t, a)
				if !v2 && epoch > 1 {
					t.Fatalf("version 1 expected: producer epoch %d after %d transactions (an epoch bump per commit is version 2)", epoch, batches)
				}
				if v2 && epoch < batches {
					t.Fatalf("version 2 expected: producer epoch %d after %d transactions", epoch, batches)
				}
			})
		}
	}
}

// fanoutEpoch is the producer epoch of a's fan-out transactional id.
func fanoutEpoch(t *testing.T, a *app.App) int16 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	txnID := a.FanoutTransactionalID()
	described, err := kadm.NewClient(cl).DescribeTransactions(ctx, txnID)
	if err != nil {
		t.Fatalf("describe transactions: %v", err)
	}
	d, ok := described[txnID]
	if !ok || d.Err != nil {
		t.Fatalf("describe %s: %v (found %t)", txnID, d.Err, ok)
	}
	return d.ProducerEpoch
}
