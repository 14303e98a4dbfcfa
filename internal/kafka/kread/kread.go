// Package kread reads a Kafka partition from any offset with plain Fetch
// requests, without a consumer's single position per partition. Laneway
// uses it where access is random: the parked backlog (one cursor per
// endpoint) and the time-range searches of the API.
package kread

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	// Next is the offset to read from next: one past the last batch this
	// fetch covered, whether or not it returned records (aborted records,
	// transaction markers and compacted-away records are not in Records but
	// still move it on). It never passes HighWatermark; it stays at the
	// offset read from only when nothing is readable there yet.
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
	raw, err := r.client.Broker(int(leader)).Request(ctx, r.fetchRequest(topicID, p, offset, maxBytes))
	if err != nil {
		r.forgetRoutes()
		return Result{}, fmt.Errorf("fetch %s/%d@%d: %w", r.topic, p, offset, err)
	}
	return r.parse(raw.(*kmsg.FetchResponse), p, offset)
}

// fetchRequest asks for one partition, bounded by the partition's byte
// limit alone. The request's own limit is the largest there is: kfake (the
// embedded broker) leaves a partition's aborted transactions out of the
// response when the request's limit is what ends the fetch, and its
// aborted records would then read as committed. With one partition the
// partition's limit binds first anyway (a real broker caps the request's
// at its fetch.max.bytes), so this changes nothing else.
func (r *Reader) fetchRequest(topicID [16]byte, p int32, offset int64, maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = math.MaxInt32
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
	return req
}

func (r *Reader) parse(resp *kmsg.FetchResponse, p int32, offset int64) (Result, error) {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return Result{}, err
	}
	rp := findPartition(resp, p)
	if rp == nil {
		return Result{}, fmt.Errorf("fetch %s/%d@%d: partition missing from the response", r.topic, p, offset)
	}
	res, err := r.process(rp, offset)
	switch {
	case errors.Is(err, kerr.OffsetOutOfRange):
		return res, ErrOffsetOutOfRange
	case err != nil:
		r.forgetRoutes()
		return res, fmt.Errorf("fetch %s/%d@%d: %w", r.topic, rp.Partition, offset, err)
	}
	return res, nil
}

func findPartition(resp *kmsg.FetchResponse, p int32) *kmsg.FetchResponseTopicPartition {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if rp := &resp.Topics[i].Partitions[j]; rp.Partition == p {
				return rp
			}
		}
	}
	return nil
}

// process decodes one partition's batches read from offset. Next is the
// offset franz-go's processing reached, not the last returned record's: it
// moves past whole batches that return nothing (aborted data, transaction
// markers, records compacted away), so a fetch of only those still moves a
// caller on instead of handing it the same offset again.
func (r *Reader) process(rp *kmsg.FetchResponseTopicPartition, offset int64) (Result, error) {
	opts := kgo.ProcessFetchPartitionOpts{Offset: offset, Topic: r.topic, Partition: rp.Partition}
	end := rp.HighWatermark
	if r.readCommitted {
		opts.IsolationLevel = kgo.ReadCommitted()
		end = rp.LastStableOffset
	}
	fp, processed := kgo.ProcessFetchPartition(opts, rp, r.decompressor, nil)
	next := clampNext(offset, processed, end)
	res := Result{Records: recordsBelow(fp.Records, next), HighWatermark: end, LogStartOffset: fp.LogStartOffset, Next: next}
	return res, fp.Err
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
	if !ok {
		return 0, id, fmt.Errorf("metadata for %s: %w", r.topic, kerr.UnknownTopicOrPartition)
	}
	if td.Err != nil {
		return 0, id, fmt.Errorf("metadata for %s: %w", r.topic, td.Err)
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
		return 0, td.ID, fmt.Errorf("%s/%d has no leader: %w", r.topic, p, kerr.LeaderNotAvailable)
	}
	return leader, td.ID, nil
}

func (r *Reader) forgetRoutes() {
	r.mu.Lock()
	r.leaders = nil
	r.mu.Unlock()
}

// recordsBelow drops records at or past next, in place, so that every
// returned record is one a caller moving to Next has read; a broker should
// send none past the readable end, and Next never passes it.
func recordsBelow(recs []*kgo.Record, next int64) []*kgo.Record {
	out := recs[:0]
	for _, r := range recs {
		if r.Offset < next {
			out = append(out, r)
		}
	}
	return out
}

// clampNext is where a read from offset goes on after the fetch processed
// up to processed: never backwards, and never past end (the high watermark,
// or the last stable offset when reading committed), which the records of
// a transaction still open lie beyond.
func clampNext(offset, processed, end int64) int64 {
	return max(offset, min(processed, end))
}
