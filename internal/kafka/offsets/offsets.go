// Package offsets reads and commits a consumer group's position in one
// partition and lists a partition's bounds: the lookups that the delivery
// stage's handover, the batch runners and the pull feeds share.
package offsets

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// CommittedOrStart returns group's committed offset of topic/p with its
// metadata, or the partition's log start when the group has committed
// none there (a group that never committed does not exist yet). It
// returns 0 when the partition is not known either.
func CommittedOrStart(ctx context.Context, adm *kadm.Client, group, topic string, p int32) (int64, string, error) {
	resp, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return 0, "", err
	}
	if o, ok := resp.Lookup(topic, p); ok && o.Err == nil && o.At >= 0 {
		return o.At, o.Metadata, nil
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, "", err
	}
	if o, ok := starts.Lookup(topic, p); ok && o.Err == nil {
		return o.Offset, "", nil
	}
	return 0, "", nil
}

// Commit stores at as group's offset of topic/p.
func Commit(ctx context.Context, adm *kadm.Client, group, topic string, p int32, at int64) error {
	offs := kadm.Offsets{}
	offs.AddOffset(topic, p, at, -1)
	resp, err := adm.CommitOffsets(ctx, group, offs)
	if err != nil {
		return err
	}
	return resp.Error()
}

// Bounds returns topic/p's log start and end offsets as listed (each with
// its own Err: kerr.UnknownTopicOrPartition for a topic not created yet);
// ok is false when the answer did not name the partition.
func Bounds(ctx context.Context, adm *kadm.Client, topic string, p int32) (start, end kadm.ListedOffset, ok bool, err error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return start, end, false, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return start, end, false, err
	}
	start, sok := starts.Lookup(topic, p)
	end, eok := ends.Lookup(topic, p)
	return start, end, sok && eok, nil
}
