package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/internal/kafkatxn"
	"github.com/laneway/laneway/internal/testenv"
	"github.com/laneway/laneway/topics"
)

func TestJavaStringHash(t *testing.T) {
	// Values of java.lang.String.hashCode, which the broker uses to place
	// a group on a __consumer_offsets partition.
	for s, want := range map[string]int32{
		"":                      0,
		"hello":                 99162322,
		"laneway-fanout":        -1957214491,
		"a-rather-long-group-1": 1969898627,
		"é€":                    15587,
	} {
		if got := javaStringHash(s); got != want {
			t.Errorf("javaStringHash(%q) = %d, want %d", s, got, want)
		}
	}
}

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
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Brokers...)}, kafkatxn.Protocol(false)...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopics(ctx, 2, 1, nil, tops.Events, tops.Deliveries, tops.Dead); err != nil {
		t.Fatal(err)
	}
	cfg := FanoutConfig{
		Brokers: b.Brokers, Topics: tops, Group: ns + "-fanout", TransactionalID: ns + "-fanout", InstanceID: "a",
		Subscribers: noSubscribers{}, RepairInterval: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	txnID := cfg.TransactionalID + "-" + cfg.InstanceID

	withoutVerification(ctx, t, adm, func() {
		pid, epoch := initProducer(ctx, t, cl, txnID)
		produceHanging(ctx, t, cl, txnID, tops.Deliveries, 1, pid, epoch)
		commitOffsetHanging(ctx, t, cl, txnID, cfg.Group, tops.Events, pid, epoch)
	})
	if end, stable := offsetsOf(ctx, t, adm, tops.Deliveries, 1); stable != 0 || end != 1 {
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
	waitFor(t, 30*time.Second, "the hanging deliveries to be committed and the offsets to be stable", func() (bool, string) {
		end, stable := offsetsOf(ctx, t, adm, tops.Deliveries, 1)
		unstable := groupOffsetsUnstable(ctx, t, cl, cfg.Group, tops.Events)
		return stable == end && !unstable, fmt.Sprintf("deliveries/1 end %d stable %d; group offsets unstable %t", end, stable, unstable)
	})
	if got := readCommitted(ctx, t, b.Brokers, tops.Deliveries); got != "hanging delivery" {
		t.Fatalf("the hanging delivery was not committed: read %q", got)
	}
}

type noSubscribers struct{}

func (noSubscribers) Subscribers(dst []string, _, _ string) []string { return dst }

// withoutVerification runs fn with the brokers' transaction verification
// (KIP-890) off, so that writes of a transaction the coordinator does not
// know about are accepted, as they were in the race that left them.
func withoutVerification(ctx context.Context, t *testing.T, adm *kadm.Client, fn func()) {
	t.Helper()
	const name = "transaction.partition.verification.enable"
	off := "false"
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: &off}}); err != nil {
		t.Fatalf("turn verification off: %v", err)
	}
	defer func() {
		if _, err := adm.AlterBrokerConfigs(context.Background(), []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: name}}); err != nil {
			t.Errorf("turn verification back on: %v", err)
		}
	}()
	// The change reaches the broker through the metadata log: wait until
	// it reports the new value.
	waitFor(t, 30*time.Second, "verification to be off", func() (bool, string) {
		described, err := adm.DescribeBrokerConfigs(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, rc := range described {
			for _, c := range rc.Configs {
				if c.Key == name && c.Value != nil && *c.Value == off {
					return true, ""
				}
			}
		}
		return false, "still on"
	})
	fn()
}

func initProducer(ctx context.Context, t *testing.T, cl *kgo.Client, txnID string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &txnID, 60_000, -1, -1
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("init producer id: %v", err)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// produceHanging writes one transactional record without adding the
// partition to a transaction first.
func produceHanging(ctx context.Context, t *testing.T, cl *kgo.Client, txnID, topic string, partition int32, pid int64, epoch int16) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &txnID, -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, transactionalBatch(pid, epoch, []byte("hanging delivery"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("produce the hanging record: %v", err)
	}
}

// transactionalBatch encodes one record in a v2 batch flagged transactional.
func transactionalBatch(pid int64, epoch int16, value []byte) []byte {
	rec := kmsg.Record{Value: value}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // the body after the length varint (0: one byte)
	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, // transactional
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: pid, ProducerEpoch: epoch,
		NumRecords: 1, Records: rec.AppendTo(nil),
	}
	raw := batch.AppendTo(nil)
	batch.Length = int32(len(raw) - 12) // after FirstOffset and Length
	raw = batch.AppendTo(nil)
	batch.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))) // from Attributes on
	return batch.AppendTo(nil)
}

// commitOffsetHanging commits an offset for group inside a transaction that
// never added the group's offsets partition.
func commitOffsetHanging(ctx context.Context, t *testing.T, cl *kgo.Client, txnID, group, topic string, pid int64, epoch int16) {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = txnID, group, pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("commit the hanging offset: %v", err)
	}
}

// offsetsOf is a partition's end offset and last stable offset.
func offsetsOf(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, partition int32) (end, stable int64) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	stables, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ends.Lookup(topic, partition)
	s, _ := stables.Lookup(topic, partition)
	return e.Offset, s.Offset
}

func groupOffsetsUnstable(ctx context.Context, t *testing.T, cl *kgo.Client, group, events string) bool {
	t.Helper()
	h := &hangingRepair{cl: cl, adm: kadm.NewClient(cl), group: group, events: events}
	unstable, err := h.offsetsUnstable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return unstable
}

// readCommitted is the first record value of topic a read_committed
// consumer sees.
func readCommitted(ctx context.Context, t *testing.T, brokers []string, topic string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	fetches := cl.PollRecords(pctx, 1)
	if err := fetches.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if recs := fetches.Records(); len(recs) > 0 {
		return string(recs[0].Value)
	}
	return ""
}

// waitFor polls cond until it holds, or fails the test after within with
// what cond said last.
func waitFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", within, what, state)
		}
		<-tick.C
	}
}
