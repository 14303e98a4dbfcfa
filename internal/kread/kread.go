// Package kread reads a Kafka partition from any offset with plain Fetch
// requests, without a consumer's single position per partition. Laneway
// uses it where access is random: the parked backlog (one cursor per
// endpoint) and the time-range searches of the API.
package kread

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

// Reader reads a partition from any offset, one fetch at a time. The
// parked backlog needs random access (each parked lane reads the partition
// at its own cursor) which a consumer client's single position per
// partition cannot give.
type Reader struct {
	client        *kgo.Client
	topic         string
	decompressor  kgo.Decompressor
	readCommitted bool

	mu      sync.Mutex
	topicID [16]byte
	leaders map[int32]int32 // partition -> leader broker
}

// NewReader reads topic through client. The client should be one of the
// reader's own: a fetch shares its broker connection with the client's
// other requests and would wait behind a consumer's long poll.
func NewReader(client *kgo.Client, topic string, opts ...Option) *Reader {
	r := &Reader{client: client, topic: topic, decompressor: kgo.DefaultDecompressor()}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Option configures a Reader.
type Option func(*Reader)

// ReadCommitted hides records of open and aborted transactions, for topics
// written transactionally; the readable end is then the last stable offset.
func ReadCommitted() Option { return func(r *Reader) { r.readCommitted = true } }

// Topic is the topic the reader reads.
func (r *Reader) Topic() string { return r.topic }

// Result is one fetch's records from offset onwards.
type Result struct {
	Records []*kgo.Record
	// HighWatermark is the end of what can be read: the high watermark, or
	// the last stable offset for a ReadCommitted reader.
	HighWatermark  int64
	LogStartOffset int64
	// Next is the offset to read from next: one past the last record or
	// transaction marker this fetch covered (aborted records and markers
	// are not in Records but still move it on).
	Next int64
}

// ErrOffsetOutOfRange means offset is below the log start (retention) or
// past the end; the caller moves to Result.LogStartOffset.
var ErrOffsetOutOfRange = errors.New("offset out of range")

// Read fetches up to maxBytes of records of partition p from offset. It does
// not wait for new data: an empty result means offset is the end.
func (r *Reader) Read(ctx context.Context, p int32, offset int64, maxBytes int32) (Result, error) {
	leader, topicID, err := r.route(ctx, p)
	if err != nil {
		return Result{}, err
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1
	if r.readCommitted {
		req.IsolationLevel = 1
	}
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
		return Result{}, fmt.Errorf("fetch %s/%d@%d: %w", r.topic, p, offset, err)
	}
	return r.parse(raw.(*kmsg.FetchResponse), p, offset)
}

func (r *Reader) parse(resp *kmsg.FetchResponse, p int32, offset int64) (Result, error) {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return Result{}, err
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			rp := &resp.Topics[i].Partitions[j]
			if rp.Partition != p {
				continue
			}
			opts := kgo.ProcessFetchPartitionOpts{Offset: offset, Topic: r.topic, Partition: p, KeepControlRecords: true}
			end := rp.HighWatermark
			if r.readCommitted {
				opts.IsolationLevel = kgo.ReadCommitted()
				end = rp.LastStableOffset
			}
			fp, _ := kgo.ProcessFetchPartition(opts, rp, r.decompressor, nil)
			res := Result{Records: dataRecords(fp.Records), HighWatermark: end, LogStartOffset: fp.LogStartOffset, Next: offset}
			if n := len(fp.Records); n > 0 {
				res.Next = fp.Records[n-1].Offset + 1
			}
			switch {
			case errors.Is(fp.Err, kerr.OffsetOutOfRange):
				return res, ErrOffsetOutOfRange
			case fp.Err != nil:
				r.forgetRoutes()
				return res, fmt.Errorf("fetch %s/%d@%d: %w", r.topic, p, offset, fp.Err)
			}
			return res, nil
		}
	}
	return Result{}, fmt.Errorf("fetch %s/%d@%d: partition missing from the response", r.topic, p, offset)
}

// route returns the partition's leader and the topic id, from cache or
// fresh metadata.
func (r *Reader) route(ctx context.Context, p int32) (int32, [16]byte, error) {
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

func (r *Reader) forgetRoutes() {
	r.mu.Lock()
	r.leaders = nil
	r.mu.Unlock()
}

// dataRecords drops transaction markers, in place.
func dataRecords(recs []*kgo.Record) []*kgo.Record {
	out := recs[:0]
	for _, r := range recs {
		if !r.Attrs.IsControl() {
			out = append(out, r)
		}
	}
	return out
}
