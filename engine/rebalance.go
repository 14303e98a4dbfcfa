package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/offsets"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/partition"
)

// Taking partitions over and giving them up: the offsets an owner starts
// from, and the release that waits for, or cancels, attempts in flight.

// onAssigned takes partitions over. It reads only the two committed
// offsets; the owner reads the parked partition afterwards, with fetching
// of the partition paused until it is done, so the rebalance callback does
// not hold up the instance's other partitions.
func (s *DeliveryStage) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	// The callback's context ends only when the client closes, which Stop
	// does after the poll loop returned; and the poll loop waits for this
	// callback. So it gives up when Stop begins, too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	member, generation := cl.GroupMetadata()
	s.fence.poke() // the owners start nothing until the lease holds
	for _, p := range assigned[s.cfg.Topics.Deliveries] {
		at, err := s.assignmentOffsets(ctx, p)
		if err != nil {
			return // the client is closing
		}
		at.Generation = int64(generation)
		d, err := newDriven(s, p, cl)
		if err != nil {
			s.cfg.Logger.Error("cannot own deliveries partition", "partition", p, "err", err)
			continue
		}
		d.member = member
		s.mu.Lock()
		s.parts[p] = d
		s.mu.Unlock()
		d.pauseFetch(cl)
		d.do(func(o *partition.Owner) { o.Assign(at) })
		if s.cfg.Ownership != nil {
			s.cfg.Ownership.Owned(p)
		}
		s.emit(Event{Kind: EventAssigned, Partition: p})
	}
}

// assignmentOffsets retries until the offsets are read or ctx ends (the
// client closing): dispatching without them could break per-entity order.
func (s *DeliveryStage) assignmentOffsets(ctx context.Context, p int32) (partition.Assignment, error) {
	for attempt := 1; ; attempt++ {
		at, err := s.tryAssignmentOffsets(ctx, p)
		if err == nil || ctx.Err() != nil {
			return at, err
		}
		s.cfg.Logger.Error("reading committed offsets failed; retrying", "partition", p, "err", err)
		if !timing.Sleep(ctx, min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)) {
			return partition.Assignment{}, ctx.Err()
		}
	}
}

func (s *DeliveryStage) tryAssignmentOffsets(ctx context.Context, p int32) (at partition.Assignment, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var meta string
	if at.DeliveriesCommitted, meta, err = offsets.CommittedOrStart(ctx, s.admin, s.cfg.Group, s.cfg.Topics.Deliveries, p); err != nil {
		return at, fmt.Errorf("deliveries commit: %w", err)
	}
	if at.Parked, err = s.parkedProgress(ctx, p, meta); err != nil {
		return at, err
	}
	ends, err := s.admin.ListEndOffsets(ctx, s.cfg.Topics.Deliveries)
	if err != nil {
		return at, fmt.Errorf("deliveries end: %w", err)
	}
	if o, ok := ends.Lookup(s.cfg.Topics.Deliveries, p); ok && o.Err == nil && o.Offset > at.DeliveriesCommitted {
		if at.ReplayEnd, err = s.lastRecordEnd(ctx, p, at.DeliveriesCommitted, o.Offset); err != nil {
			return at, fmt.Errorf("deliveries end: %w", err)
		}
	}
	return at, nil
}

// parkedProgress decodes the parked progress the deliveries commit carries.
// A commit without one (written before progress moved into it) falls back
// to the parked group's offset, every endpoint read from there.
func (s *DeliveryStage) parkedProgress(ctx context.Context, p int32, meta string) (partition.ParkedProgress, error) {
	progress, err := partition.DecodeProgress(meta)
	if err == nil {
		return progress, nil
	}
	if !errors.Is(err, partition.ErrNoProgress) {
		s.cfg.Logger.Warn("unreadable parked progress in the deliveries commit; reading the parked group's", "partition", p, "err", err)
	}
	at, _, err := offsets.CommittedOrStart(ctx, s.admin, s.cfg.ParkedGroup, s.cfg.Topics.Parked, p)
	if err != nil {
		return progress, fmt.Errorf("parked commit: %w", err)
	}
	return partition.ParkedProgress{Commit: at, Rest: at}, nil
}

// replayTailOffsets is how far below the end of the deliveries partition
// lastRecordEnd looks for its last record.
const replayTailOffsets = 64

// lastRecordEnd returns one past the last record below end, so that the
// owner's replay hold ends when it has routed that record: the offsets just
// below the end of a transactional topic are commit markers, which no
// fetch returns. With no record in the tail it returns from: the hold then
// ends on its time limit.
func (s *DeliveryStage) lastRecordEnd(ctx context.Context, p int32, from, end int64) (int64, error) {
	start := max(from, end-replayTailOffsets)
	res, err := s.deliveriesReader.Read(ctx, p, start, 1<<20)
	if err != nil {
		return 0, err
	}
	last := from
	for _, r := range res.Records {
		if r.Offset < end {
			last = r.Offset + 1
		}
	}
	return last, nil
}

func (s *DeliveryStage) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	s.releaseRevoked(ctx, cl, revoked[s.cfg.Topics.Deliveries])
}

// releaseRevoked gives up revoked partitions. Those taken over under an
// earlier member id are lost, not revoked: the group dropped this member
// meanwhile (a session expiry, a poll loop stuck past the rebalance
// timeout), another member may have owned them since, and franz-go, which
// rejoins after a commit fails with UNKNOWN_MEMBER_ID, revokes them only
// once the member has joined again, when a commit would be accepted
// under the new generation and move the other owner's progress backwards.
func (s *DeliveryStage) releaseRevoked(ctx context.Context, cl *kgo.Client, parts []int32) {
	member, _ := cl.GroupMetadata()
	var revoked, lost []int32
	for _, p := range parts {
		if d := s.owned(p); d != nil && d.member != member {
			lost = append(lost, p)
		} else {
			revoked = append(revoked, p)
		}
	}
	if len(lost) > 0 {
		s.cfg.Logger.Warn("revoked partitions were taken over under an earlier group membership; releasing them as lost",
			"partitions", lost)
		s.release(ctx, cl, lost, true)
	}
	s.release(ctx, cl, revoked, false)
}

// onLost drops the partitions without committing, and cancels their
// attempts at once: another member may own them already (it may be
// delivering their entities now), and a commit from us could move its
// progress backwards (the group refuses it anyway).
func (s *DeliveryStage) onLost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	s.release(ctx, cl, lost[s.cfg.Topics.Deliveries], true)
}

// release gives partitions up: unstarted tasks are dropped (the next owner
// reads them again from the committed watermark). On a revoke or Stop,
// in-flight attempts are awaited, and canceled at RevokeTimeout, so two
// owners never deliver the same entity at once; then the watermarks are
// committed. A lost partition's attempts are canceled at once (they end as
// Canceled, counted nowhere) and nothing is committed.
func (s *DeliveryStage) release(ctx context.Context, cl *kgo.Client, parts []int32, lost bool) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	var gone []*driven
	s.mu.Lock()
	for _, p := range parts {
		if d, ok := s.parts[p]; ok {
			gone = append(gone, d)
			delete(s.parts, p)
		}
	}
	s.mu.Unlock()
	for _, d := range gone {
		d.do((*partition.Owner).Stop)
		d.resumeFetch(cl)
	}
	deadline := time.Now().Add(s.cfg.RevokeTimeout)
	if lost {
		deadline = time.Now() // nothing may finish: the next owner may be at work
	}
	for _, d := range gone {
		d.awaitIdle(deadline)
		if s.cfg.Ownership != nil {
			s.cfg.Ownership.Released(d.id, deadline)
		}
	}
	if !lost {
		_ = s.commitPartitions(ctx, cl, gone) // a failure is logged; the next owner replays from the last commit
	}
	s.handOverBreakers(ctx, gone, !lost)
	for _, d := range gone {
		s.cfg.Logger.Info("deliveries partition released", "partition", d.id, "committed", !lost)
		s.emit(Event{Kind: EventReleased, Partition: d.id})
	}
}
