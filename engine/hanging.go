package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/topics"
)

// A hanging transaction is one that a partition still holds open after its
// coordinator has finished it: the coordinator's marker never reached the
// partition. Kafka never closes it by itself, and it stops every
// read_committed reader for good — a deliveries partition's last stable
// offset stands still, or the fan-out group's offsets answer
// UNSTABLE_OFFSET_COMMIT and the fan-out cannot resume. It was seen after
// broker restarts in the fault harness (docs/reliability.md, F3).
//
// The producer that owns it can close it with the ordinary protocol: a
// transaction that adds the partition and ends makes the coordinator write
// a marker there, and a marker completes whatever that producer had open on
// the partition. hangingRepair does that for the fan-out's own producer,
// choosing the outcome that can only cause replays, never losses:
//
//   - on a deliveries partition it commits: the hanging deliveries become
//     readable. If their transaction had in fact aborted, its events were
//     not marked consumed either and are fanned out again: duplicates,
//     which receivers drop by webhook-id.
//   - on the group's offsets it aborts: the pending offsets are dropped and
//     the fan-out resumes from the last committed ones, so events whose
//     deliveries did commit are fanned out again (duplicates again).
type hangingRepair struct {
	cl     *kgo.Client // the fan-out session's client: its producer id
	adm    *kadm.Client
	txnID  string
	group  string
	topic  string // deliveries
	events string // the topic whose offsets the group commits
	every  time.Duration
	logger *slog.Logger
	now    func() time.Time

	next time.Time
	// open is what the previous check saw open for this producer:
	// partition ("deliveries/3", "offsets") -> the transaction's start offset.
	open map[string]int64
	// unstableChecks counts consecutive checks that found some of the
	// group's offsets pending while this producer had no transaction.
	unstableChecks int
	offsetsPart    int32 // the group's __consumer_offsets partition; -1 until known
}

// unstableChecksBeforeAbort is how many consecutive checks must find the
// group's offsets pending, while this producer is between transactions,
// before it aborts an empty transaction on the group's offsets. Pending
// offsets of another instance's live transactions come and go within a
// second; the abort only ever drops this producer's own pending offsets,
// so a needless one costs a round of requests and nothing else.
const unstableChecksBeforeAbort = 4

func newHangingRepair(cl *kgo.Client, txnID, group string, tops topics.Config, every time.Duration, logger *slog.Logger, now func() time.Time) *hangingRepair {
	return &hangingRepair{
		cl: cl, adm: kadm.NewClient(cl), txnID: txnID, group: group, topic: tops.Deliveries, events: tops.Events,
		every: every, logger: logger, now: now, open: map[string]int64{}, offsetsPart: -1,
	}
}

// maybeRepair runs a check when one is due. It must only be called between
// the fan-out's transactions. It reports whether it ended a transaction of
// its own, after which the caller must renew its session: the raw requests
// went around the client's transaction state.
func (h *hangingRepair) maybeRepair(ctx context.Context) bool {
	if h.now().Before(h.next) {
		return false
	}
	h.next = h.now().Add(h.every)
	ctx, cancel := context.WithTimeout(ctx, h.every)
	defer cancel()
	repaired, err := h.check(ctx)
	if err != nil && ctx.Err() == nil {
		h.logger.Debug("hanging transaction check failed", "err", err)
	}
	return repaired
}

func (h *hangingRepair) check(ctx context.Context) (bool, error) {
	// While the coordinator is completing a transaction of ours, its
	// markers may still be on their way: skip the check, keep what the
	// previous one saw (a start offset seen twice is one transaction).
	done, err := h.coordinatorDone(ctx)
	if err != nil || !done {
		return false, err
	}
	id, epoch, err := h.cl.ProducerID(ctx)
	if err != nil {
		return false, err
	}
	open, err := h.openTransactions(ctx, id)
	if err != nil {
		return false, err
	}
	var commitParts []int32
	abortOffsets := false
	for key, start := range open {
		if prev, ok := h.open[key]; !ok || prev != start {
			continue // not seen at the previous check: give its marker time
		}
		var p int32
		if _, err := fmt.Sscanf(key, "deliveries/%d", &p); err == nil {
			commitParts = append(commitParts, p)
		} else {
			abortOffsets = true
		}
	}
	h.open = open
	if unstable, err := h.offsetsUnstable(ctx); err == nil && unstable {
		h.unstableChecks++
	} else {
		h.unstableChecks = 0
	}
	if h.unstableChecks >= unstableChecksBeforeAbort {
		abortOffsets, h.unstableChecks = true, 0
	}
	repaired := false
	if len(commitParts) > 0 {
		slices.Sort(commitParts)
		h.logger.Warn("committing hanging fan-out transaction on deliveries partitions; their events may be delivered twice",
			"partitions", commitParts, "producer_id", id)
		if err := h.end(ctx, id, epoch, true, commitParts, false); err != nil {
			return true, fmt.Errorf("commit hanging deliveries: %w", err)
		}
		repaired = true
	}
	if abortOffsets {
		h.logger.Warn("aborting pending fan-out offsets nothing else completes; recent events may be fanned out twice",
			"group", h.group, "producer_id", id)
		if err := h.end(ctx, id, epoch, false, nil, true); err != nil {
			return true, fmt.Errorf("abort hanging offsets: %w", err)
		}
		repaired = true
	}
	if repaired {
		h.open = map[string]int64{}
	}
	return repaired, nil
}

// coordinatorDone reports whether the coordinator holds no live transaction
// for this transactional id: only then is a partition's open transaction
// of this producer one that nothing will ever complete.
func (h *hangingRepair) coordinatorDone(ctx context.Context) (bool, error) {
	described, err := h.adm.DescribeTransactions(ctx, h.txnID)
	if err != nil {
		return false, err
	}
	d, ok := described[h.txnID]
	if !ok {
		return false, errors.New("transaction not described")
	}
	if d.Err != nil {
		return false, d.Err
	}
	switch d.State {
	case "Empty", "CompleteCommit", "CompleteAbort":
		return true, nil
	}
	return false, nil
}

// openTransactions are the partitions (deliveries and the group's offsets
// partition) on which producer id has a transaction open, with its start.
func (h *hangingRepair) openTransactions(ctx context.Context, id int64) (map[string]int64, error) {
	if err := h.findOffsetsPartition(ctx); err != nil {
		return nil, err
	}
	topics, err := h.adm.ListTopics(ctx, h.topic)
	if err != nil {
		return nil, err
	}
	set := kadm.TopicsSet{}
	for _, p := range topics[h.topic].Partitions.Numbers() {
		set.Add(h.topic, p)
	}
	set.Add(offsetsTopic, h.offsetsPart)
	described, err := h.adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, err
	}
	open := map[string]int64{}
	described.EachPartition(func(d kadm.DescribedProducersPartition) {
		for _, pr := range d.ActiveProducers {
			if pr.ProducerID != id || pr.CurrentTxnStartOffset < 0 {
				continue
			}
			key := "offsets"
			if d.Topic == h.topic {
				key = fmt.Sprintf("deliveries/%d", d.Partition)
			}
			open[key] = pr.CurrentTxnStartOffset
		}
	})
	return open, nil
}

const offsetsTopic = "__consumer_offsets"

// findOffsetsPartition computes which __consumer_offsets partition holds
// the group, as the broker does: Java's String.hashCode of the group id,
// made non-negative, modulo the partition count.
func (h *hangingRepair) findOffsetsPartition(ctx context.Context) error {
	if h.offsetsPart >= 0 {
		return nil
	}
	topics, err := h.adm.ListTopics(ctx, offsetsTopic)
	if err != nil {
		return err
	}
	n := len(topics[offsetsTopic].Partitions)
	if n == 0 {
		return fmt.Errorf("%s has no partitions", offsetsTopic)
	}
	h.offsetsPart = int32(int(javaStringHash(h.group)&0x7fffffff) % n)
	return nil
}

func javaStringHash(s string) int32 {
	var hash int32
	for _, u := range utf16.Encode([]rune(s)) {
		hash = 31*hash + int32(u)
	}
	return hash
}

// offsetsUnstable reports whether some of the group's offsets for the
// events partitions answer UNSTABLE_OFFSET_COMMIT (a transactional commit
// is pending). The partitions are named: asked for all its offsets, the
// broker only lists partitions that already have a committed one.
func (h *hangingRepair) offsetsUnstable(ctx context.Context) (bool, error) {
	topics, err := h.adm.ListTopics(ctx, h.events)
	if err != nil {
		return false, err
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = h.group
	req.RequireStable = true
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = h.events, topics[h.events].Partitions.Numbers()
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, h.cl)
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

// end runs one transaction of this producer that only adds partitions
// (deliveries) or the group's offsets, and ends it: the coordinator then
// writes its marker to each, which completes what was hanging there.
func (h *hangingRepair) end(ctx context.Context, id int64, epoch int16, commit bool, parts []int32, offsets bool) error {
	if len(parts) > 0 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = h.txnID, id, epoch
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic, t.Partitions = h.topic, parts
		req.Topics = append(req.Topics, t)
		if err := retryConcurrent(ctx, func() error {
			resp, err := req.RequestWith(ctx, h.cl)
			if err != nil {
				return err
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("add partitions: %w", err)
		}
	}
	if offsets {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = h.txnID, id, epoch, h.group
		if err := retryConcurrent(ctx, func() error {
			resp, err := req.RequestWith(ctx, h.cl)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(resp.ErrorCode)
		}); err != nil {
			return fmt.Errorf("add offsets: %w", err)
		}
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = h.txnID, id, epoch, commit
	return retryConcurrent(ctx, func() error {
		resp, err := req.RequestWith(ctx, h.cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

// retryConcurrent retries fn while the coordinator answers that another
// transaction of this producer is still being completed.
func retryConcurrent(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if !errors.Is(err, kerr.ConcurrentTransactions) && !errors.Is(err, kerr.CoordinatorLoadInProgress) {
			return err
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}
