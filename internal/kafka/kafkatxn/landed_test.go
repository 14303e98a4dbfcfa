package kafkatxn_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/kafkatxn"
	"github.com/laneway/laneway/internal/kafka/kafkatxn/hangtest"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestLandedCommitsSkippedMarkers gives a producer records that its
// coordinator reports finished while the partition still holds them in an
// open transaction — what Kafka's coordinator leaves when it skips the
// markers of a leaderless partition — and checks that Landed commits them
// (readable afterwards), while it returns at once for a partition whose
// markers are in place.
func TestLandedCommitsSkippedMarkers(t *testing.T) {
	b, ok := testenv.RealKafka()
	if !ok {
		t.Skip("needs the real broker")
	}
	ns := testenv.Unique("landed")
	topic, txnID := ns+".out", ns+"-txn"
	ctx, admCl, adm := hangtest.Rig(t, b.Brokers, topic)
	hangtest.WithoutVerification(ctx, t, adm, func() {
		pid, epoch := hangtest.InitProducer(ctx, t, admCl, txnID)
		hangtest.ProduceHanging(ctx, t, admCl, txnID, topic, 1, pid, epoch, "committed but unmarked")
	})

	producer, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Brokers...), kgo.TransactionalID(txnID)},
		kafkatxn.Protocol(false)...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	repair := kafkatxn.NewRepair(kafkatxn.RepairConfig{
		Client: producer, TransactionalID: txnID, Group: ns + "-group", Outputs: []string{topic},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if repair.Landed(ctx, kadm.TopicsSet{topic: {0: {}}}) {
		t.Fatal("Landed repaired a partition without an open transaction")
	}
	if end, stable := hangtest.Offsets(ctx, t, adm, topic, 1); stable != 0 || end != 1 {
		t.Fatalf("the open transaction was not made: end %d, last stable %d", end, stable)
	}
	if !repair.Landed(ctx, kadm.TopicsSet{topic: {1: {}}}) {
		t.Fatal("Landed did not commit the records whose markers were missing")
	}
	if end, stable := hangtest.Offsets(ctx, t, adm, topic, 1); stable != end {
		t.Fatalf("still open after Landed: end %d, last stable %d", end, stable)
	}
	if got := hangtest.ReadCommitted(ctx, t, b.Brokers, topic); got != "committed but unmarked" {
		t.Fatalf("read committed %q", got)
	}
}
