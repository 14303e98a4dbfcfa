// Package hangtest makes hanging Kafka transactions on a real broker, for
// the tests of the code that repairs them (kafkatxn, engine): records and
// offset commits of a transactional producer that its coordinator knows
// nothing about, which a broker accepts only with transaction verification
// turned off.
package hangtest

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/internal/kafka/kafkatxn"
)

// Rig is a client (capped at transaction protocol version 1, like
// Laneway's) and an admin on brokers, with topics created (two partitions
// each), and a context for the test; all are closed when the test ends.
func Rig(t *testing.T, brokers []string, topics ...string) (context.Context, *kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, kafkatxn.Protocol(false)...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopics(ctx, 2, 1, nil, topics...); err != nil {
		t.Fatal(err)
	}
	return ctx, cl, adm
}

// WithoutVerification runs fn with the brokers' transaction verification
// (KIP-890) off, so that writes of a transaction the coordinator does not
// know about are accepted, as they were in the race that left them. The
// setting is cluster-wide and the test packages run in parallel, so the
// section holds a lock file, and both changes are waited for until the
// broker reports them.
func WithoutVerification(ctx context.Context, t *testing.T, adm *kadm.Client, fn func()) {
	t.Helper()
	unlock := lockFile(t, filepath.Join(os.TempDir(), "laneway-hangtest.lock"))
	defer unlock()
	off := "false"
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: verification, Value: &off}}); err != nil {
		t.Fatalf("turn verification off: %v", err)
	}
	defer func() {
		if _, err := adm.AlterBrokerConfigs(context.Background(), []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: verification}}); err != nil {
			t.Errorf("turn verification back on: %v", err)
		}
		waitVerification(ctx, t, adm, "")
	}()
	waitVerification(ctx, t, adm, off)
	fn()
}

const verification = "transaction.partition.verification.enable"

// waitVerification waits until the cluster-wide dynamic setting reads want
// ("" once it is deleted): a change reaches the broker through the
// metadata log.
func waitVerification(ctx context.Context, t *testing.T, adm *kadm.Client, want string) {
	t.Helper()
	WaitFor(t, 30*time.Second, "verification setting to be "+strconv.Quote(want), func() (bool, string) {
		described, err := adm.DescribeBrokerConfigs(ctx)
		if err != nil {
			return false, err.Error()
		}
		got := ""
		for _, rc := range described {
			for _, c := range rc.Configs {
				if c.Key == verification && c.Value != nil {
					got = *c.Value
				}
			}
		}
		return got == want, "it is " + strconv.Quote(got)
	})
}

// lockFile takes an exclusive lock on path, across processes.
func lockFile(t *testing.T, path string) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return func() { f.Close() } // closing releases the lock
}

// WaitForProducer waits until txnID has a producer and no transaction in
// progress, and returns its producer id and epoch.
func WaitForProducer(ctx context.Context, t *testing.T, adm *kadm.Client, txnID string) (int64, int16) {
	t.Helper()
	var pid int64
	var epoch int16
	WaitFor(t, 30*time.Second, "the producer of "+txnID, func() (bool, string) {
		described, err := adm.DescribeTransactions(ctx, txnID)
		if err != nil {
			return false, err.Error()
		}
		d, ok := described[txnID]
		if !ok || d.Err != nil {
			return false, fmt.Sprint("not described: ", d.Err)
		}
		pid, epoch = d.ProducerID, d.ProducerEpoch
		return pid >= 0 && (d.State == "Empty" || d.State == "CompleteCommit" || d.State == "CompleteAbort"), "state " + d.State
	})
	return pid, epoch
}

// InitProducer initialises txnID's producer, as a new client would.
func InitProducer(ctx context.Context, t *testing.T, cl *kgo.Client, txnID string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &txnID, 60_000, -1, -1
	resp, err := req.RequestWith(ctx, cl)
	requireAnswered(t, "init producer id", err, func() int16 { return resp.ErrorCode })
	return resp.ProducerID, resp.ProducerEpoch
}

// ProduceHanging writes one transactional record (value) without adding
// the partition to a transaction first.
func ProduceHanging(ctx context.Context, t *testing.T, cl *kgo.Client, txnID, topic string, partition int32, pid int64, epoch int16, value string) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &txnID, -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, transactionalBatch(pid, epoch, []byte(value))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	requireAnswered(t, "produce the hanging record", err, func() int16 { return resp.Topics[0].Partitions[0].ErrorCode })
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

// CommitOffsetHanging commits an offset for group inside a transaction that
// never added the group's offsets partition.
func CommitOffsetHanging(ctx context.Context, t *testing.T, cl *kgo.Client, txnID, group, topic string, pid int64, epoch int16) {
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
	requireAnswered(t, "commit the hanging offset", err, func() int16 { return resp.Topics[0].Partitions[0].ErrorCode })
}

// requireAnswered fails t unless the request was answered (err nil) with
// no error code (code reads it from the answer).
func requireAnswered(t *testing.T, what string, err error, code func() int16) {
	t.Helper()
	if err == nil {
		err = kerr.ErrorForCode(code())
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Offsets is a partition's end offset and last stable offset.
func Offsets(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, partition int32) (end, stable int64) {
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

// ReadCommitted is the first record value of topic a read_committed
// consumer sees.
func ReadCommitted(ctx context.Context, t *testing.T, brokers []string, topic string) string {
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

// WaitFor polls cond until it holds, or fails the test after within with
// what cond said last.
func WaitFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
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

// OffsetsUnstable reports whether some of group's offsets for topic answer
// UNSTABLE_OFFSET_COMMIT (a transactional commit is pending). The
// partitions are named: asked for all its offsets, the broker only lists
// partitions that already have a committed one.
func OffsetsUnstable(ctx context.Context, cl *kgo.Client, group, topic string) (bool, error) {
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return false, err
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	req.RequireStable = true
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, topics[topic].Partitions.Numbers()
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false, err
	}
	unstable := resp.ErrorCode == kerr.UnstableOffsetCommit.Code
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			unstable = unstable || p.ErrorCode == kerr.UnstableOffsetCommit.Code
		}
	}
	return unstable, nil
}
