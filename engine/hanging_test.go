package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafkatxn"
	"github.com/laneway/laneway/internal/kafkatxn/hangtest"
	"github.com/laneway/laneway/internal/testenv"
	"github.com/laneway/laneway/topics"
)

// TestFanoutRepairsHangingTransactions makes, on the real broker, the two
// hanging transactions the fault harness found after broker restarts — a
// deliveries partition and the fan-out group's offsets held by a
// transaction of the fan-out's producer that its coordinator knows nothing
// about — and checks that the fan-out closes both: the deliveries commit
// (readable, never lost) and the pending offsets are dropped (the group's
// offsets are stable again). Kafka refuses such writes unless transaction
// verification is off, so the test turns it off while it makes them.
func TestFanoutRepairsHangingTransactions(t *testing.T) {
	b, ok := testenv.RealKafka()
	if !ok {
		t.Skip("needs the real broker (kfake has no hanging transactions to repair)")
	}
	ns := testenv.Unique("hang")
	tops := topics.Config{Events: ns + ".events", Deliveries: ns + ".deliveries", Dead: ns + ".dead"}.WithDefaults()
	ctx, cl, adm := hangtest.Rig(t, b.Brokers, tops.Events, tops.Deliveries, tops.Dead)
	cfg := FanoutConfig{
		Brokers: b.Brokers, Topics: tops, Group: ns + "-fanout", TransactionalID: ns + "-fanout", InstanceID: "a",
		Subscribers: noSubscribers{}, RepairInterval: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	txnID := cfg.TransactionalID + "-" + cfg.InstanceID

	hangtest.WithoutVerification(ctx, t, adm, func() {
		pid, epoch := hangtest.InitProducer(ctx, t, cl, txnID)
		hangtest.ProduceHanging(ctx, t, cl, txnID, tops.Deliveries, 1, pid, epoch, "hanging delivery")
		hangtest.CommitOffsetHanging(ctx, t, cl, txnID, cfg.Group, tops.Events, pid, epoch)
	})
	if end, stable := hangtest.Offsets(ctx, t, adm, tops.Deliveries, 1); stable != 0 || end != 1 {
		t.Fatalf("the hanging transaction was not made: deliveries/1 end %d, last stable %d", end, stable)
	}
	if !groupOffsetsUnstable(ctx, t, cl, cfg.Group, tops.Events) {
		t.Fatal("the hanging offset commit was not made: the group's offsets are stable")
	}

	f, err := NewFanout(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	defer f.Stop()
	hangtest.WaitFor(t, 30*time.Second, "the hanging deliveries to be committed and the offsets to be stable", func() (bool, string) {
		end, stable := hangtest.Offsets(ctx, t, adm, tops.Deliveries, 1)
		unstable := groupOffsetsUnstable(ctx, t, cl, cfg.Group, tops.Events)
		return stable == end && !unstable, fmt.Sprintf("deliveries/1 end %d stable %d; group offsets unstable %t", end, stable, unstable)
	})
	if got := hangtest.ReadCommitted(ctx, t, b.Brokers, tops.Deliveries); got != "hanging delivery" {
		t.Fatalf("the hanging delivery was not committed: read %q", got)
	}
}

type noSubscribers struct{}

func (noSubscribers) Subscribers(dst []string, _, _ string) []string { return dst }

func groupOffsetsUnstable(ctx context.Context, t *testing.T, cl *kgo.Client, group, events string) bool {
	t.Helper()
	unstable, err := kafkatxn.OffsetsUnstable(ctx, cl, group, events)
	if err != nil {
		t.Fatal(err)
	}
	return unstable
}
