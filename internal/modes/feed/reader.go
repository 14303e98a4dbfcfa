package feed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/kafka/offsets"
	"github.com/laneway/laneway/internal/model/topics"
)

// Limits of a page.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	MaxWait      = 30 * time.Second
	// pageBytes bounds one fetch: a page of MaxLimit small events, or a
	// few large ones (an event is at most 1 MiB).
	pageBytes = 4 << 20
	// maxReaders bounds the per-feed readers kept (routes cached).
	maxReaders = 4096
)

// ReaderConfig configures a Reader.
type ReaderConfig struct {
	// Client fetches the feeds. It should be the reader's own: its
	// fetches are short, but share the connections of its other requests.
	// Required.
	Client *kgo.Client
	// Watcher lets long polls wait for appends. Required.
	Watcher *Watcher
	// Topics names the feed topics. Default: topics.Config{} defaults.
	Topics topics.Config
}

// Reader reads pages of feeds.
type Reader struct {
	cfg ReaderConfig

	mu      sync.Mutex
	readers map[string]*kread.Reader
}

// NewReader returns a Reader.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	if cfg.Client == nil || cfg.Watcher == nil {
		return nil, errors.New("feed reader: Client and Watcher are required")
	}
	return &Reader{cfg: cfg, readers: map[string]*kread.Reader{}}, nil
}

// Page is a run of a feed's events from a cursor.
type Page struct {
	// Events are the events, each rendered as the feed shows it (JSON
	// with its sequence first), in sequence order.
	Events [][]byte
	// Next is the offset to read from next.
	Next int64
}

// Read returns up to limit events of the endpoint's feed from offset from.
// When there are none yet it waits up to wait for one. A from below the
// retained start is an *ExpiredError; past the end, an *AheadError. A feed
// whose topic does not exist yet reads as empty.
func (r *Reader) Read(ctx context.Context, endpointID string, from int64, limit int, wait time.Duration) (Page, error) {
	topic := r.cfg.Topics.Feed(endpointID)
	limit = min(max(limit, 1), MaxLimit)
	page, err := r.read(ctx, topic, from, limit)
	if err != nil && wait > 0 && transient(err) {
		// A feed just made, or a leader moving: a long poll waits it out
		// rather than failing the consumer's read.
		page, err = Page{Next: from}, nil
	}
	if err != nil || len(page.Events) > 0 || wait <= 0 {
		return page, err
	}
	wctx, cancel := context.WithTimeout(ctx, min(wait, MaxWait))
	defer cancel()
	if !r.cfg.Watcher.Wait(wctx, topic, page.Next) {
		return page, ctx.Err() // nil when only the wait ran out
	}
	return r.read(ctx, topic, page.Next, limit)
}

// transient reports whether a read failed for a moment only.
func transient(err error) bool {
	return errors.Is(err, kerr.LeaderNotAvailable) || errors.Is(err, kerr.NotLeaderForPartition) || kerr.IsRetriable(err)
}

// read fetches from offset until it has limit events or reaches the end.
// A fetch that returned no record but moved on (offsets a record batch
// covers without a record) is followed by the next.
func (r *Reader) read(ctx context.Context, topic string, from int64, limit int) (Page, error) {
	kr := r.reader(topic)
	page := Page{Next: from}
	for len(page.Events) < limit {
		res, err := kr.Read(ctx, 0, page.Next, pageBytes)
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			return page, nil
		case errors.Is(err, kread.ErrOffsetOutOfRange):
			return page, r.outOfRange(ctx, topic, page.Next, res)
		case err != nil:
			return page, err
		}
		for _, rec := range res.Records {
			if rec.Offset < page.Next || len(page.Events) == limit {
				continue
			}
			page.Events = append(page.Events, render(rec))
			page.Next = rec.Offset + 1
		}
		if len(page.Events) < limit {
			if res.Next <= page.Next {
				return page, nil // the end
			}
			page.Next = res.Next
		}
	}
	return page, nil
}

// outOfRange tells a cursor below the retained start from one past the
// end. A real broker's answer carries neither bound with the error, so
// they are listed then.
func (r *Reader) outOfRange(ctx context.Context, topic string, from int64, res kread.Result) error {
	start, end := res.LogStartOffset, res.HighWatermark
	if start < 0 || end < 0 {
		s, e, _, err := offsets.Bounds(ctx, kadm.NewClient(r.cfg.Client), topic, 0)
		if err != nil {
			return fmt.Errorf("feed %s bounds: %w", topic, err)
		}
		start, end = s.Offset, e.Offset
	}
	if from < start {
		return &ExpiredError{Oldest: start}
	}
	return &AheadError{End: end}
}

// render puts the sequence in front of the stored body, which is the
// delivery's payload: {"id":…,"type":…,…}.
func render(rec *kgo.Record) []byte {
	out := make([]byte, 0, len(rec.Value)+32)
	out = append(out, `{"sequence":`...)
	out = strconv.AppendInt(out, rec.Offset, 10)
	if len(rec.Value) > 2 && rec.Value[0] == '{' {
		out = append(out, ',')
		return append(out, rec.Value[1:]...)
	}
	return append(out, '}') // not written by Writer; show the sequence alone
}

func (r *Reader) reader(topic string) *kread.Reader {
	r.mu.Lock()
	defer r.mu.Unlock()
	if kr, ok := r.readers[topic]; ok {
		return kr
	}
	if len(r.readers) >= maxReaders {
		clear(r.readers) // routes are re-read on the next use; cheap
	}
	kr := kread.NewReader(r.cfg.Client, topic)
	r.readers[topic] = kr
	return kr
}

// forget drops the cached reader of a deleted feed.
func (r *Reader) forget(topic string) {
	r.mu.Lock()
	delete(r.readers, topic)
	r.mu.Unlock()
}
