package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetReader reads a partition from any offset, one fetch at a time. The
// parked backlog needs random access (each parked lane reads the partition
// at its own cursor) which a consumer client's single position per
// partition cannot give.
type offsetReader struct {
	client       *kgo.Client
	topic        string
	decompressor kgo.Decompressor

	mu      sync.Mutex
	topicID [16]byte
	leaders map[int32]int32 // partition -> leader broker
}

func newOffsetReader(client *kgo.Client, topic string) *offsetReader {
	return &offsetReader{client: client, topic: topic, decompressor: kgo.DefaultDecompressor()}
}

// readResult is one fetch's records from offset onwards.
type readResult struct {
	records        []*kgo.Record
	highWatermark  int64
	logStartOffset int64
}

// errOffsetOutOfRange means offset is below the log start (retention) or
// past the end; the caller moves to readResult.logStartOffset.
var errOffsetOutOfRange = errors.New("offset out of range")

// read fetches up to maxBytes of records of partition p from offset. It does
// not wait for new data: an empty result means offset is the end.
func (r *offsetReader) read(ctx context.Context, p int32, offset int64, maxBytes int32) (readResult, error) {
	leader, topicID, err := r.route(ctx, p)
	if err != nil {
		return readResult{}, err
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = r.topic, topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, maxBytes
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw, err := r.client.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		r.forgetRoutes()
		return readResult{}, fmt.Errorf("fetch %s/%d@%d: %w", r.topic, p, offset, err)
	}
	return r.parse(raw.(*kmsg.FetchResponse), p, offset)
}

func (r *offsetReader) parse(resp *kmsg.FetchResponse, p int32, offset int64) (readResult, error) {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return readResult{}, err
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			rp := &resp.Topics[i].Partitions[j]
			if rp.Partition != p {
				continue
			}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset: offset, Topic: r.topic, Partition: p,
			}, rp, r.decompressor, nil)
			res := readResult{records: fp.Records, highWatermark: fp.HighWatermark, logStartOffset: fp.LogStartOffset}
			switch {
			case errors.Is(fp.Err, kerr.OffsetOutOfRange):
				return res, errOffsetOutOfRange
			case fp.Err != nil:
				r.forgetRoutes()
				return res, fmt.Errorf("fetch %s/%d@%d: %w", r.topic, p, offset, fp.Err)
			}
			return res, nil
		}
	}
	return readResult{}, fmt.Errorf("fetch %s/%d@%d: partition missing from the response", r.topic, p, offset)
}

// route returns the partition's leader and the topic id, from cache or
// fresh metadata.
func (r *offsetReader) route(ctx context.Context, p int32) (int32, [16]byte, error) {
	r.mu.Lock()
	leader, ok := r.leaders[p]
	id := r.topicID
	r.mu.Unlock()
	if ok {
		return leader, id, nil
	}
	details, err := kadm.NewClient(r.client).ListTopics(ctx, r.topic)
	if err != nil {
		return 0, id, fmt.Errorf("metadata for %s: %w", r.topic, err)
	}
	td, ok := details[r.topic]
	if !ok || td.Err != nil {
		return 0, id, fmt.Errorf("metadata for %s: %v", r.topic, td.Err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.topicID = td.ID
	r.leaders = map[int32]int32{}
	for _, pd := range td.Partitions {
		r.leaders[pd.Partition] = pd.Leader
	}
	leader, ok = r.leaders[p]
	if !ok || leader < 0 {
		return 0, td.ID, fmt.Errorf("%s/%d has no leader", r.topic, p)
	}
	return leader, td.ID, nil
}

func (r *offsetReader) forgetRoutes() {
	r.mu.Lock()
	r.leaders = nil
	r.mu.Unlock()
}
