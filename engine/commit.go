package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/partition"
)

// Commits: the deliveries watermark with the parked progress as its
// metadata, in one commit the consumer group fences.

func (s *DeliveryStage) commit() {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	_ = s.commitPartitions(s.ctx, s.client, s.ownedPartitions()) // logged; retried on the next round
}

// commitPartitions commits, for each partition that moved, the deliveries
// watermark with the parked progress as its metadata: one commit of the
// consumer group, which refuses it from a member that lost the partition,
// so a zombie never moves the next owner's parked progress. The parked
// commit is then mirrored under the memberless parked group, for lag
// tooling only: assignment reads it just when the deliveries commit holds
// no progress (one written before progress moved into it). It returns the
// deliveries commit's error (logged here), nil when it landed or nothing
// moved.
func (s *DeliveryStage) commitPartitions(ctx context.Context, cl *kgo.Client, ds []*driven) error {
	commits := map[int32]partition.Commit{}
	for _, d := range ds {
		d.do(func(o *partition.Owner) {
			if c, moved := o.PendingCommit(); moved {
				commits[d.id] = c
			}
		})
	}
	if len(commits) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.commitDeliveries(ctx, cl, commits); err != nil {
		s.cfg.Logger.Warn("deliveries commit failed; will retry", "err", err)
		return err
	}
	parked := kadm.Offsets{}
	for _, d := range ds {
		if c, ok := commits[d.id]; ok {
			d.do(func(o *partition.Owner) { o.Committed(c) })
			s.emit(Event{Kind: EventCommitted, Partition: d.id, Offset: c.Deliveries})
			parked.AddOffset(s.cfg.Topics.Parked, d.id, c.Parked.Commit, -1)
		}
	}
	s.mirrorParked(ctx, parked)
	return nil
}

// commitDeliveries commits the watermarks with their parked progress as
// metadata, under cl's group generation and member id.
func (s *DeliveryStage) commitDeliveries(ctx context.Context, cl *kgo.Client, commits map[int32]partition.Commit) error {
	offsets := make(map[int32]kgo.EpochOffset, len(commits))
	for p, c := range commits {
		offsets[p] = kgo.EpochOffset{Epoch: -1, Offset: c.Deliveries}
	}
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				rp := &req.Topics[i].Partitions[j]
				if c, ok := commits[rp.Partition]; ok && req.Topics[i].Topic == s.cfg.Topics.Deliveries {
					rp.Metadata = kmsg.StringPtr(c.Metadata)
				}
			}
		}
		return nil
	})
	var commitErr error
	all := map[string]map[int32]kgo.EpochOffset{s.cfg.Topics.Deliveries: offsets}
	cl.CommitOffsetsSync(ctx, all, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = firstCommitError(resp, err)
	})
	return commitErr
}

// mirrorParked commits the parked offsets under the parked group, where
// consumer-lag tools see them; a failure is only logged.
func (s *DeliveryStage) mirrorParked(ctx context.Context, offsets kadm.Offsets) {
	resp, err := s.admin.CommitOffsets(ctx, s.cfg.ParkedGroup, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		s.cfg.Logger.Warn("mirroring the parked commit failed", "err", err)
	}
}

func firstCommitError(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil || resp == nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, err)
			}
		}
	}
	return nil
}
