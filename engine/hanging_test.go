package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/kafkatxn/hangtest"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestFanoutRepairsHangingTransactions makes, on the real broker, the two
// hanging transactions the fault harness found after broker restarts — a
// deliveries partition and the fan-out group's offsets held by a
// transaction of the fan-out's producer that its coordinator knows nothing
// about — and checks that the fan-out closes both, whether they were there
// before it started (a predecessor's last commit that lost its markers:
// Session.Run settles them first) or appear while it runs (the periodic check):
// the deliveries become readable (never lost) and the group's offsets
// stable again. Kafka refuses such writes unless transaction verification
// is off, so the test turns it off while it makes them.
func TestFanoutRepairsHangingTransactions(t *testing.T) {
	b, ok := testenv.RealKafka()
	if !ok {
		t.Skip("needs the real broker (kfake has no hanging transactions to repair)")
	}
	for _, whileRunning := range []bool{false, true} {
		t.Run(fmt.Sprintf("while_running=%t", whileRunning), func(t *testing.T) {
			ns := testenv.Unique("hang")
			tops := topics.Config{Events: ns + ".events", Deliveries: ns + ".deliveries", Dead: ns + ".dead"}.WithDefaults()
			ctx, cl, adm := hangtest.Rig(t, b.Brokers, tops.Events, tops.Deliveries, tops.Dead)
			group := topics.GroupsFor(ns).Fanout
			cfg := FanoutConfig{
				Brokers: b.Brokers, Topics: tops, Group: group, TransactionalID: group, InstanceID: "a",
				Subscribers: noSubscribers{}, RepairInterval: 300 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			f, err := NewFanout(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer testenv.Stop(t, f.Stop)
			hang := func(pid int64, epoch int16) {
				hangtest.WithoutVerification(ctx, t, adm, func() {
					hangtest.ProduceHanging(ctx, t, cl, f.TransactionalID(), tops.Deliveries, 1, pid, epoch, "hanging delivery")
					hangtest.CommitOffsetHanging(ctx, t, cl, f.TransactionalID(), cfg.Group, tops.Events, pid, epoch)
				})
				// A running fan-out may already have closed it by now; the
				// record must be there in any case.
				if end, stable := hangtest.Offsets(ctx, t, adm, tops.Deliveries, 1); end < 1 || (!whileRunning && stable != 0) {
					t.Fatalf("the hanging transaction was not made: deliveries/1 end %d, last stable %d", end, stable)
				}
			}
			if whileRunning {
				if err := f.Start(ctx); err != nil {
					t.Fatal(err)
				}
				pid, epoch := hangtest.WaitForProducer(ctx, t, adm, f.TransactionalID())
				hang(pid, epoch)
			} else {
				hang(hangtest.InitProducer(ctx, t, cl, f.TransactionalID()))
				if err := f.Start(ctx); err != nil {
					t.Fatal(err)
				}
			}
			hangtest.WaitFor(t, 30*time.Second, "the hanging deliveries to be committed and the offsets to be stable", func() (bool, string) {
				end, stable := hangtest.Offsets(ctx, t, adm, tops.Deliveries, 1)
				unstable := groupOffsetsUnstable(ctx, t, cl, cfg.Group, tops.Events)
				return stable == end && !unstable, fmt.Sprintf("deliveries/1 end %d stable %d; group offsets unstable %t", end, stable, unstable)
			})
			if got := hangtest.ReadCommitted(ctx, t, b.Brokers, tops.Deliveries); got != "hanging delivery" {
				t.Fatalf("the hanging delivery was not committed: read %q", got)
			}
		})
	}
}

type noSubscribers struct{}

func (noSubscribers) Subscribers(dst []string, _, _ string) []string { return dst }

func groupOffsetsUnstable(ctx context.Context, t *testing.T, cl *kgo.Client, group, events string) bool {
	t.Helper()
	unstable, err := hangtest.OffsetsUnstable(ctx, cl, group, events)
	if err != nil {
		t.Fatal(err)
	}
	return unstable
}
