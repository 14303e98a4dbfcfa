// Package logscan pages through a Kafka topic by time range: the search
// behind the API's dead-letter and event listings and behind redrive.
//
// A scan starts at the offsets Kafka finds for the range's start time
// (ListOffsets by timestamp), never at the beginning of the topic, and ends
// at the offsets for its end time, fixed when the first page is asked for so
// that later pages are stable while the topic keeps growing. Partitions are
// read one after the other in ascending order; the opaque cursor carries
// each unfinished partition's next offset and end.
package logscan

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// Limits on one page.
const (
	DefaultLimit   = 100
	MaxLimit       = 1000
	DefaultMaxScan = 50_000 // records examined per page, matching or not
	// One fetch asks for about what is left of the span, so that a narrow
	// range does not pull a megabyte of records past its end.
	minFetchBytes       = 16 << 10
	maxFetchBytes       = 1 << 20
	bytesPerRecordGuess = 512
)

// Scanner searches one topic. It is safe for concurrent use.
type Scanner struct {
	reader *kread.Reader
	admin  *kadm.Client
	// scanned counts every record examined, for metrics and for tests that
	// prove a narrow search reads a small part of the topic; fetched counts
	// every record Kafka returned, examined or not.
	scanned, fetched atomic.Int64
}

// New returns a scanner over reader's topic; admin answers offset lookups.
func New(reader *kread.Reader, admin *kadm.Client) *Scanner {
	return &Scanner{reader: reader, admin: admin}
}

// Scanned is the number of records examined since the scanner was made.
func (s *Scanner) Scanned() int64 { return s.scanned.Load() }

// Fetched is the number of records fetched from Kafka since the scanner
// was made, including those past a range's end that were not examined.
func (s *Scanner) Fetched() int64 { return s.fetched.Load() }

// Query is one page request.
type Query struct {
	// Since and Until bound the records' timestamps (inclusive); zero
	// leaves that side open. Ignored when Cursor is set.
	Since, Until time.Time
	// Partitions restricts the scan (for example to the partition an
	// endpoint's key hashes to); nil means every partition.
	Partitions []int32
	// Cursor continues a previous page's scan.
	Cursor string
	// Limit is the number of matching records per page. Default 100, at most 1000.
	Limit int
	// MaxScan bounds the records examined per page, so a rare match cannot
	// turn one request into a full-topic read. Default 50,000.
	MaxScan int
	// Match selects records; nil matches all.
	Match func(*kgo.Record) bool
}

// Page is one page of matches.
type Page struct {
	Records []*kgo.Record
	// Next continues the scan; empty when the range is exhausted.
	Next string
	// Scanned is the number of records this page examined.
	Scanned int
}

// ErrBadCursor means the cursor was not made by this scanner's topic.
var ErrBadCursor = errors.New("invalid cursor")

// ErrNoProgress means a fetch below a partition's readable end moved the
// scan nowhere.
var ErrNoProgress = errors.New("scan made no progress")

// span is what is left to read of one partition: [Next, End).
type span struct {
	Partition int32 `json:"p"`
	Next      int64 `json:"n"`
	End       int64 `json:"e"`
}

type cursor struct {
	Topic string `json:"t"`
	Since int64  `json:"s,omitempty"` // unix ms; the time filter survives paging
	Until int64  `json:"u,omitempty"`
	Spans []span `json:"r"`
}

// Scan returns the next page of records matching q.
func (s *Scanner) Scan(ctx context.Context, q Query) (Page, error) {
	q = q.withDefaults()
	c, err := s.start(ctx, q)
	if err != nil {
		return Page{}, err
	}
	var page Page
	for len(c.Spans) > 0 && len(page.Records) < q.Limit && page.Scanned < q.MaxScan {
		sp := &c.Spans[0]
		if err := s.readSpan(ctx, sp, c, q, &page); err != nil {
			return Page{}, err
		}
		if sp.Next >= sp.End {
			c.Spans = c.Spans[1:]
		}
	}
	if len(c.Spans) > 0 {
		page.Next = encodeCursor(c)
	}
	return page, nil
}

func (q Query) withDefaults() Query {
	q.Limit = valutil.PositiveOr(q.Limit, DefaultLimit)
	q.Limit = min(q.Limit, MaxLimit)
	q.MaxScan = valutil.PositiveOr(q.MaxScan, DefaultMaxScan)
	return q
}

// readSpan reads one fetch of the span's partition into page.
func (s *Scanner) readSpan(ctx context.Context, sp *span, c cursor, q Query, page *Page) error {
	from := sp.Next
	want := min(sp.End-from, int64(q.Limit-len(page.Records)), int64(q.MaxScan-page.Scanned))
	res, err := s.reader.Read(ctx, sp.Partition, from, fetchSize(want))
	switch {
	case errors.Is(err, kread.ErrOffsetOutOfRange):
		if res.LogStartOffset > sp.Next { // expired by retention: skip what is gone
			sp.Next = res.LogStartOffset
			return nil
		}
		sp.Next = sp.End // the end moved below us (topic recreated): nothing left
		return nil
	case err != nil:
		return err
	}
	s.fetched.Add(int64(len(res.Records)))
	for _, r := range res.Records {
		if r.Offset < sp.Next {
			continue
		}
		if r.Offset >= sp.End || len(page.Records) >= q.Limit || page.Scanned >= q.MaxScan {
			break
		}
		sp.Next = r.Offset + 1
		page.Scanned++
		s.scanned.Add(1)
		if inRange(r.Timestamp, c.Since, c.Until) && (q.Match == nil || q.Match(r)) {
			page.Records = append(page.Records, r)
		}
	}
	if len(page.Records) < q.Limit && page.Scanned < q.MaxScan {
		// Everything fetched was consumed: move past markers and aborted
		// records too, or to the end when the partition has no more.
		sp.Next = max(sp.Next, min(res.Next, sp.End))
		if res.Next <= sp.Next && len(res.Records) == 0 && res.HighWatermark <= sp.Next {
			sp.Next = sp.End // nothing readable remains below the end
		}
	}
	if sp.Next == from {
		// Scan would ask for the same offset again, for ever: kread moves
		// Next past everything a fetch covers, so this is a broker that
		// returned nothing below the readable end.
		return fmt.Errorf("%w: %s/%d read nothing at %d (readable end %d)", ErrNoProgress, s.reader.Topic(), sp.Partition, from, res.HighWatermark)
	}
	return nil
}

// fetchSize is the byte budget of a fetch meant to return about records.
func fetchSize(records int64) int32 {
	return int32(min(max(records*bytesPerRecordGuess, minFetchBytes), maxFetchBytes))
}

func inRange(ts time.Time, since, until int64) bool {
	ms := ts.UnixMilli()
	return (since == 0 || ms >= since) && (until == 0 || ms <= until)
}

// start decodes the cursor or, for a first page, finds each partition's
// offsets for the time range.
func (s *Scanner) start(ctx context.Context, q Query) (cursor, error) {
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil || c.Topic != s.reader.Topic() {
			return cursor{}, ErrBadCursor
		}
		return c, nil
	}
	c := cursor{Topic: s.reader.Topic()}
	if !q.Since.IsZero() {
		c.Since = q.Since.UnixMilli()
	}
	if !q.Until.IsZero() {
		c.Until = q.Until.UnixMilli()
	}
	spans, err := s.spans(ctx, q)
	if err != nil {
		return cursor{}, err
	}
	c.Spans = spans
	return c, nil
}

func (s *Scanner) spans(ctx context.Context, q Query) ([]span, error) {
	topic := s.reader.Topic()
	ends, err := s.admin.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	starts, err := s.offsetsAt(ctx, q.Since, s.admin.ListStartOffsets)
	if err != nil {
		return nil, err
	}
	var untils kadm.ListedOffsets
	if !q.Until.IsZero() {
		// The first offset stamped after Until ends the range.
		if untils, err = s.offsetsAt(ctx, q.Until.Add(time.Millisecond), nil); err != nil {
			return nil, err
		}
	}
	var out []span
	ends.Each(func(end kadm.ListedOffset) {
		if q.Partitions != nil && !slices.Contains(q.Partitions, end.Partition) {
			return
		}
		sp := span{Partition: end.Partition, Next: end.Offset, End: end.Offset}
		if st, ok := starts.Lookup(topic, end.Partition); ok && st.Offset >= 0 {
			sp.Next = min(st.Offset, end.Offset)
		}
		if u, ok := untils.Lookup(topic, end.Partition); ok && u.Offset >= 0 {
			sp.End = min(u.Offset, end.Offset)
		}
		if sp.Next < sp.End {
			out = append(out, sp)
		}
	})
	slices.SortFunc(out, func(a, b span) int { return int(a.Partition - b.Partition) })
	return out, nil
}

// offsetsAt lists the first offset at or after t in every partition; for a
// zero t it asks whole instead (the log start).
func (s *Scanner) offsetsAt(ctx context.Context, t time.Time, whole func(context.Context, ...string) (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
	topic := s.reader.Topic()
	var (
		offs kadm.ListedOffsets
		err  error
	)
	if t.IsZero() {
		offs, err = whole(ctx, topic)
	} else {
		offs, err = s.admin.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topic)
	}
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("offsets of %s: %w", topic, err)
	}
	return offs, nil
}

func encodeCursor(c cursor) string {
	raw, _ := json.Marshal(c) // plain structs always encode
	return base64.RawURLEncoding.EncodeToString(raw)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, err
	}
	for _, sp := range c.Spans {
		if sp.Next < 0 || sp.End < sp.Next {
			return c, ErrBadCursor
		}
	}
	return c, nil
}
