package inbound

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/kafka/logscan"
)

// Filter selects inbound requests. Zero fields match everything.
type Filter struct {
	Source string
	// Status is pending, verified, rejected or duplicate.
	Status string
	// Job selects the outcomes of one replay job's copies.
	Job string
	// Since and Until bound the time of the request's latest state:
	// receipt for pending requests, the verification for the others.
	Since, Until time.Time
	// decided skips pending requests (replays take only decided ones).
	decided bool
}

// Page is one page of a listing.
type Page = logscan.Found[Item]

// Finder lists inbound requests from the inbound topic alone and reads
// captured requests back by id. It is safe for concurrent use.
//
// A listing reads the topic's records in the time range (read_committed,
// so outcomes of aborted verify transactions never show): every outcome
// record is one decided request; a capture record is a pending request when
// its offset is at or above the verify group's committed offset in its
// partition (everything below has a committed outcome, written in the same
// transaction as the offset) and is skipped otherwise. A source's records
// all sit in the partition its id hashes to, so a listing by source reads
// one partition.
type Finder struct {
	topic   string
	group   string
	scanner *logscan.Scanner
	raw     *kread.Reader // read_uncommitted: captures are never transactional
	stable  *kread.Reader // read_committed: outcomes are written in the verify transactions
	admin   *kadm.Client

	keys *logscan.KeyPartitions // captures are keyed by source
}

func newFinder(client *kgo.Client, topic, group string) *Finder {
	admin := kadm.NewClient(client)
	return &Finder{
		topic: topic, group: group, admin: admin,
		scanner: logscan.NewCommitted(client, topic),
		raw:     kread.NewReader(client, topic),
		stable:  kread.NewReader(client, topic, kread.ReadCommitted()),
		keys:    logscan.NewKeyPartitions(admin, topic),
	}
}

// Find returns one page of requests matching filter, continuing from
// cursor when it is not empty.
func (f *Finder) Find(ctx context.Context, filter Filter, cursor string, limit int) (Page, error) {
	q := logscan.Query{Since: filter.Since, Until: filter.Until, Cursor: cursor, Limit: limit}
	if filter.Source != "" {
		parts, err := f.keys.Of(ctx, filter.Source)
		if err != nil {
			return Page{}, err
		}
		q.Partitions = parts
	}
	var committed map[int32]int64
	if !filter.decided && (filter.Status == "" || filter.Status == StatusPending) {
		var err error
		if committed, err = f.committed(ctx); err != nil {
			return Page{}, err
		}
	}
	return logscan.Find(ctx, f.scanner, q, func(r *kgo.Record) (Item, bool) {
		it, ok := f.itemOf(r, committed)
		return it, ok && filter.matches(&it)
	})
}

// itemOf reads a record as a listed request: an outcome, or a capture that
// is still pending. Anything else is not listed.
func (f *Finder) itemOf(r *kgo.Record, committed map[int32]int64) (Item, bool) {
	switch recordKind(r) {
	case kindOutcome:
		return decodeOutcome(r)
	case kindCapture:
		if committed == nil {
			return Item{}, false
		}
		if c, ok := committed[r.Partition]; ok && r.Offset < c {
			return Item{}, false // decided: its outcome is listed instead
		}
		c, err := decodeCapture(r)
		if err != nil {
			return Item{ID: RequestID(r.Partition, r.Offset), Source: string(r.Key), Status: StatusPending, ReceivedAt: r.Timestamp}, true
		}
		return itemOf(&c), true
	}
	return Item{}, false
}

func (flt *Filter) matches(it *Item) bool {
	switch {
	case flt.Source != "" && it.Source != flt.Source:
		return false
	case flt.Status != "" && it.Status != flt.Status:
		return false
	case flt.decided && it.Status == StatusPending:
		return false
	case flt.Job != "" && it.Job != flt.Job:
		return false
	}
	return true
}

// committed returns the verify group's committed offset per partition of
// the inbound topic; a partition without one is missing (all pending).
func (f *Finder) committed(ctx context.Context) (map[int32]int64, error) {
	offs, err := f.admin.FetchOffsets(ctx, f.group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{}, nil // no verifier has committed yet
	}
	if err != nil {
		return nil, fmt.Errorf("committed offsets of %s: %w", f.group, err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == f.topic && o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

// Get reads the captured request with this id. ok is false when the id
// names no capture (not an id, expired by retention, or an outcome).
func (f *Finder) Get(ctx context.Context, id string) (Capture, bool, error) {
	p, o, ok := ParseRequestID(id)
	if !ok {
		return Capture{}, false, nil
	}
	res, err := f.raw.Read(ctx, p, o, 1<<20)
	if errors.Is(err, kread.ErrOffsetOutOfRange) {
		return Capture{}, false, nil
	}
	if err != nil {
		return Capture{}, false, err
	}
	for _, r := range res.Records {
		if r.Offset != o {
			continue
		}
		c, err := decodeCapture(r)
		if err != nil {
			return Capture{}, false, nil
		}
		return c, true, nil
	}
	return Capture{}, false, nil
}

// outcomeSearch bounds how far past a capture Outcome looks for its
// outcome: the verify stage writes it in the transaction that consumes the
// capture, so it follows within about one poll's worth of records.
const outcomeSearch = 4 << 20

// outcomeFetch is the byte limit of one of Outcome's reads.
const outcomeFetch = 1 << 20

// Outcome is the verify stage's decision on capture id: pending while the
// verify group has not consumed it, else the outcome record found after
// it. ok is false when a decided capture's outcome is not within
// outcomeSearch bytes after it (or expired).
func (f *Finder) Outcome(ctx context.Context, c *Capture) (Item, bool, error) {
	p, o, ok := ParseRequestID(c.ID)
	if !ok {
		return Item{}, false, nil
	}
	committed, err := f.committed(ctx)
	if err != nil {
		return Item{}, false, err
	}
	if next, ok := committed[p]; !ok || next <= o {
		return itemOf(c), true, nil
	}
	for from, read := o+1, int64(0); read < outcomeSearch; {
		res, err := f.stable.Read(ctx, p, from, outcomeFetch)
		if err != nil {
			return Item{}, false, err
		}
		for _, r := range res.Records {
			if it, ok := decodeOutcome(r); ok && it.ID == c.ID {
				return it, true, nil
			}
			read += int64(len(r.Value))
		}
		if len(res.Records) == 0 {
			read += outcomeFetch // aborted outcomes and markers: read, but not returned
		}
		// A fetch of only aborted verify transactions returns no records
		// yet moves Next on; only the readable end leaves it in place.
		if res.Next <= from || res.Next >= res.HighWatermark {
			break
		}
		from = res.Next
	}
	return Item{}, false, nil
}
