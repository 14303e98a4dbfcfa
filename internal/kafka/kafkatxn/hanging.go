package kafkatxn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// A hanging transaction is one that a partition still holds open after its
// coordinator has finished it: the coordinator's marker never reached the
// partition. Kafka never closes it by itself, and it stops every
// read_committed reader for good — an output partition's last stable
// offset stands still, or the group's offsets answer UNSTABLE_OFFSET_COMMIT
// and the consume-transform-produce loop cannot resume. The fault harness
// saw it after broker restarts (docs/reliability.md, F3).
//
// The producer that owns it can close it with the ordinary protocol: a
// transaction that adds the partition and ends makes the coordinator write
// a marker there, and a marker completes whatever that producer had open on
// the partition. Repair does that for one transactional producer, choosing
// the outcome that can only cause replays, never losses:
//
//   - on an output partition it commits: the hanging records become
//     readable. If their transaction had in fact aborted, its input was not
//     marked consumed either and is processed again: duplicates.
//   - on the group's offsets it aborts: the pending offsets are dropped and
//     the group resumes from the last committed ones (duplicates again).
type Repair struct {
	cfg RepairConfig
	adm *kadm.Client

	next time.Time
	// open is what the previous check saw open for this producer:
	// partition (or offsetsKey) -> the transaction's start offset.
	open        map[partitionKey]int64
	offsetsPart int32 // the group's __consumer_offsets partition; -1 until known, -2 if there is none or it may not be read
}

// RepairConfig configures a Repair.
type RepairConfig struct {
	// Client is the transactional client (it has the producer id). Required.
	Client *kgo.Client
	// TransactionalID of Client. Required.
	TransactionalID string
	// Group is the consumer group whose offsets its transactions commit. Required.
	Group string
	// Outputs are the topics its transactions write to. Required.
	Outputs []string
	// Every is how often a check runs. Default 5s.
	Every time.Duration
	// Checks is told whether each check could run. Nil: only Debug lines.
	Checks *Checks
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// NewRepair returns a Repair for cfg's producer.
func NewRepair(cfg RepairConfig) *Repair {
	cfg.Every = valutil.PositiveOr(cfg.Every, 5*time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Now = timing.Clock(cfg.Now)
	return &Repair{cfg: cfg, adm: kadm.NewClient(cfg.Client), open: map[partitionKey]int64{}, offsetsPart: -1}
}

// Maybe runs a check when one is due. It must only be called between the
// producer's transactions. It reports whether it ended a transaction of its
// own, after which the caller must renew its client: the raw requests went
// around the client's transaction state.
func (h *Repair) Maybe(ctx context.Context) bool {
	if h.cfg.Now().Before(h.next) {
		return false
	}
	h.next = h.cfg.Now().Add(h.cfg.Every)
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Every)
	defer cancel()
	repaired, err := h.check(ctx)
	switch {
	case err == nil:
		h.cfg.Checks.Ran(CheckHanging)
	case permanent(err):
		h.cfg.Checks.Unavailable(CheckHanging, err)
	case ctx.Err() == nil:
		h.cfg.Logger.Debug("hanging transaction check failed", "txn_id", h.cfg.TransactionalID, "err", err)
	}
	return repaired
}

func (h *Repair) check(ctx context.Context) (bool, error) {
	// While the coordinator is completing a transaction of ours, its
	// markers may still be on their way: skip the check, keep what the
	// previous one saw (a start offset seen twice is one transaction).
	done, err := h.coordinatorDone(ctx)
	if err != nil || !done {
		return false, err
	}
	id, epoch, err := h.cfg.Client.ProducerID(ctx)
	if err != nil {
		return false, err
	}
	open, err := h.openTransactions(ctx, id)
	if err != nil {
		return false, err
	}
	hanging := kadm.TopicsSet{}
	abortOffsets := false
	for key, start := range open {
		if prev, ok := h.open[key]; !ok || prev != start {
			continue // not seen at the previous check: give its marker time
		}
		if key == offsetsKey {
			abortOffsets = true
		} else {
			hanging.Add(key.topic, key.partition)
		}
	}
	h.open = open
	repaired := false
	if len(hanging) > 0 {
		h.cfg.Logger.Warn("committing a hanging transaction; its input may be processed twice",
			"txn_id", h.cfg.TransactionalID, "producer_id", id, "partitions", hanging.Sorted())
		if err := h.end(ctx, id, epoch, true, hanging, false); err != nil {
			return true, fmt.Errorf("commit hanging records: %w", err)
		}
		repaired = true
	}
	if abortOffsets {
		h.cfg.Logger.Warn("aborting pending offsets nothing else completes; recent input may be processed twice",
			"txn_id", h.cfg.TransactionalID, "producer_id", id, "group", h.cfg.Group)
		if err := h.end(ctx, id, epoch, false, nil, true); err != nil {
			return true, fmt.Errorf("abort hanging offsets: %w", err)
		}
		repaired = true
	}
	if repaired {
		h.open = map[partitionKey]int64{}
	}
	return repaired, nil
}

// partitionKey names a partition; offsetsKey is the group's offsets.
type partitionKey struct {
	topic     string
	partition int32
}

var offsetsKey = partitionKey{topic: offsetsTopic}

// coordinatorDone reports whether the coordinator holds no live transaction
// for this transactional id: only then is a partition's open transaction
// of this producer one that nothing will ever complete.
func (h *Repair) coordinatorDone(ctx context.Context) (bool, error) {
	described, err := h.adm.DescribeTransactions(ctx, h.cfg.TransactionalID)
	if err != nil {
		return false, err
	}
	d, ok := described[h.cfg.TransactionalID]
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

// openTransactions are the partitions (outputs and the group's offsets
// partition) on which producer id has a transaction open, with its start.
func (h *Repair) openTransactions(ctx context.Context, id int64) (map[partitionKey]int64, error) {
	if err := h.findOffsetsPartition(ctx); err != nil {
		return nil, err
	}
	set, err := h.outputPartitions(ctx)
	if err != nil {
		return nil, err
	}
	h.addOffsetsPartition(set)
	return h.openOn(ctx, id, set)
}

// openOn are the partitions of set on which producer id has a transaction
// open, with its start offset (the group's offsets partition as offsetsKey).
func (h *Repair) openOn(ctx context.Context, id int64, set kadm.TopicsSet) (map[partitionKey]int64, error) {
	described, err := h.adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, err
	}
	open := map[partitionKey]int64{}
	var partErr error
	described.EachPartition(func(d kadm.DescribedProducersPartition) {
		if d.Topic == offsetsTopic && permanent(d.Err) {
			// Not allowed to read the group's offsets: check the outputs
			// without them, and say that part cannot run.
			h.offsetsDenied(d.Err)
			return
		}
		if d.Err != nil && partErr == nil {
			partErr = fmt.Errorf("%s/%d: %w", d.Topic, d.Partition, d.Err)
		}
		for _, pr := range d.ActiveProducers {
			if pr.ProducerID != id || pr.CurrentTxnStartOffset < 0 {
				continue
			}
			key := partitionKey{d.Topic, d.Partition}
			if d.Topic == offsetsTopic {
				key = offsetsKey
			}
			open[key] = pr.CurrentTxnStartOffset
		}
	})
	return open, partErr
}

// Landed makes sure the markers of a transaction that just committed
// reached the partitions it wrote. Kafka's coordinator skips the markers of
// a partition that has no leader at that moment (it takes it for deleted —
// and a single-node cluster that is shutting down or starting has no
// leaders) and still completes the commit. The records then stay in an open
// transaction that the producer's next transaction joins, and if that one
// aborts — likely, with the broker going down — it takes the committed
// records with it: they are lost (docs/reliability.md, F2). So before the
// next transaction begins, Landed waits until the written partitions no
// longer hold this producer's transaction open. Once the coordinator has
// finished and some still do, the markers were skipped: it commits them
// again (a transaction over those partitions and the group's offsets, whose
// pending commit was skipped the same way), waits for those markers, and
// reports true; the caller must then renew its client. While the brokers
// cannot answer, it waits.
func (h *Repair) Landed(ctx context.Context, written kadm.TopicsSet) bool {
	if len(written) == 0 {
		return false
	}
	ours := kadm.TopicsSet{} // a copy: the group's offsets partition joins it
	ours.Merge(written)
	written = ours
	backoff := 2 * time.Millisecond
	repaired := false
	for round := 0; ; round++ {
		// Markers usually arrive within a few milliseconds of the commit:
		// the coordinator is only asked from the third round on.
		again, done, err := h.landedOnce(ctx, written, round >= 2)
		repaired = repaired || again
		if done {
			h.cfg.Checks.Ran(CheckMarkers)
			return repaired
		}
		if permanent(err) {
			// Not allowed or not supported: waiting would stop the loop
			// for good. The periodic check (Maybe) is all that is left.
			h.cfg.Checks.Unavailable(CheckMarkers, err)
			h.cfg.Logger.Debug("cannot check that a transaction's markers landed", "txn_id", h.cfg.TransactionalID, "err", err)
			return repaired
		}
		if err != nil {
			h.cfg.Logger.Debug("checking that a transaction's markers landed", "txn_id", h.cfg.TransactionalID, "err", err)
		}
		if !timing.Sleep(ctx, backoff) {
			return repaired
		}
		backoff = min(2*backoff, time.Second)
	}
}

// Settle is Landed over every partition of the outputs, for when it is not
// known what the producer's last transaction wrote: at start (a crashed
// predecessor's last commit may have lost its markers) and after a failed
// transaction. Committing whatever this producer still has open is always
// consistent: its offsets are only ever added to a transaction after all
// its records were written, so either both become visible or the input is
// processed again.
func (h *Repair) Settle(ctx context.Context) bool {
	set, err := h.outputPartitions(ctx)
	if err != nil {
		h.cfg.Logger.Debug("listing the outputs to settle", "txn_id", h.cfg.TransactionalID, "err", err)
		return false // the periodic check (Maybe) still runs
	}
	return h.Landed(ctx, set)
}

// outputPartitions is every partition of the outputs.
func (h *Repair) outputPartitions(ctx context.Context) (kadm.TopicsSet, error) {
	topics, err := h.adm.ListTopics(ctx, h.cfg.Outputs...)
	if err != nil {
		return nil, err
	}
	set := kadm.TopicsSet{}
	for _, td := range topics {
		for _, p := range td.Partitions.Numbers() {
			set.Add(td.Topic, p)
		}
	}
	return set, nil
}

// permanent reports whether err is a broker's answer that retrying will
// not change (authorization, an unsupported request), as opposed to the
// broker being away or moving leadership.
func permanent(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && !ke.Retriable
}

// landedOnce is one round of Landed: repaired means it committed skipped
// markers again, done that nothing is left open.
func (h *Repair) landedOnce(ctx context.Context, written kadm.TopicsSet, askCoordinator bool) (repaired, done bool, err error) {
	id, epoch, err := h.cfg.Client.ProducerID(ctx)
	if err != nil {
		return false, false, err
	}
	if err := h.findOffsetsPartition(ctx); err != nil {
		return false, false, err
	}
	h.addOffsetsPartition(written)
	if open, err := h.openOn(ctx, id, written); err != nil || len(open) == 0 || !askCoordinator {
		return false, err == nil && len(open) == 0, err
	}
	// The coordinator first, then the partitions again: a partition still
	// open after the coordinator finished can no longer get its marker.
	finished, err := h.coordinatorDone(ctx)
	if err != nil || !finished {
		return false, false, err
	}
	open, err := h.openOn(ctx, id, written)
	if err != nil || len(open) == 0 {
		return false, err == nil, err
	}
	missing := kadm.TopicsSet{}
	for key := range open {
		if key != offsetsKey { // added by end's offsets flag
			missing.Add(key.topic, key.partition)
		}
	}
	_, offsetsOpen := open[offsetsKey]
	h.cfg.Logger.Warn("the coordinator skipped a committed transaction's markers; committing it again",
		"txn_id", h.cfg.TransactionalID, "producer_id", id, "partitions", missing.Sorted(), "group_offsets", offsetsOpen)
	if err := h.end(ctx, id, epoch, true, missing, true); err != nil {
		return false, false, fmt.Errorf("commit skipped markers: %w", err)
	}
	return true, false, nil // done once the new markers are there
}

const offsetsTopic = "__consumer_offsets"

// findOffsetsPartition computes which __consumer_offsets partition holds
// the group, as the broker does: Java's String.hashCode of the group id,
// made non-negative, modulo the partition count.
func (h *Repair) findOffsetsPartition(ctx context.Context) error {
	if h.offsetsPart != -1 {
		return nil
	}
	topics, err := h.adm.ListTopics(ctx, offsetsTopic)
	if te := topics[offsetsTopic].Err; err == nil && permanent(te) {
		err = te // not allowed to describe it; a cluster without it (kfake) says UNKNOWN_TOPIC_OR_PARTITION
	}
	if permanent(err) {
		h.offsetsDenied(err)
		return nil
	}
	if err != nil {
		return err
	}
	n := len(topics[offsetsTopic].Partitions)
	if n == 0 { // kfake keeps offsets elsewhere: nothing to look at
		h.offsetsPart = -2
		return nil
	}
	h.offsetsPart = offsetsPartitionFor(h.cfg.Group, n)
	h.cfg.Checks.Ran(CheckGroupOffsets)
	return nil
}

// offsetsDenied leaves the group's offsets out of the checks: the
// principal may not describe or read __consumer_offsets. The outputs are
// still checked.
func (h *Repair) offsetsDenied(err error) {
	h.offsetsPart = -2
	h.cfg.Checks.Unavailable(CheckGroupOffsets, err)
}

// offsetsPartitionFor is the __consumer_offsets partition of group among n:
// Kafka's Utils.abs (Math.abs, with MIN_VALUE mapped to 0 — not the bit
// mask of its partitioner) of the group id's String.hashCode, modulo n.
func offsetsPartitionFor(group string, n int) int32 {
	h := javaStringHash(group)
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return int32(int(h) % n)
}

// addOffsetsPartition adds the group's offsets partition to set, if any.
func (h *Repair) addOffsetsPartition(set kadm.TopicsSet) {
	if h.offsetsPart >= 0 {
		set.Add(offsetsTopic, h.offsetsPart)
	}
}

func javaStringHash(s string) int32 {
	var hash int32
	for _, u := range utf16.Encode([]rune(s)) {
		hash = 31*hash + int32(u)
	}
	return hash
}

// end runs one transaction of this producer that only adds partitions
// (outputs) or the group's offsets, and ends it: the coordinator then
// writes its marker to each, which completes what was hanging there.
func (h *Repair) end(ctx context.Context, id int64, epoch int16, commit bool, parts kadm.TopicsSet, offsets bool) error {
	if len(parts) > 0 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = h.cfg.TransactionalID, id, epoch
		for _, tp := range parts.IntoList() {
			t := kmsg.NewAddPartitionsToTxnRequestTopic()
			t.Topic, t.Partitions = tp.Topic, tp.Partitions
			req.Topics = append(req.Topics, t)
		}
		if err := retryConcurrent(ctx, func() error {
			resp, err := req.RequestWith(ctx, h.cfg.Client)
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
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = h.cfg.TransactionalID, id, epoch, h.cfg.Group
		if err := retryConcurrent(ctx, func() error {
			resp, err := req.RequestWith(ctx, h.cfg.Client)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(resp.ErrorCode)
		}); err != nil {
			return fmt.Errorf("add offsets: %w", err)
		}
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = h.cfg.TransactionalID, id, epoch, commit
	return retryConcurrent(ctx, func() error {
		resp, err := req.RequestWith(ctx, h.cfg.Client)
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
		if !timing.Sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}
