package logscan

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/kread"
)

// NewCommitted returns a scanner over topic that reads only committed
// records (the topics searched are written in transactions too) through
// client, which should be the scanner's own (see kread.NewReader).
func NewCommitted(client *kgo.Client, topic string) *Scanner {
	return New(kread.NewReader(client, topic, kread.ReadCommitted()), kadm.NewClient(client))
}

// Found is one page of the values Find decoded. Its JSON is the page every
// search of the admin API answers (dead letters, events, inbound
// requests), so that each search declares its items and nothing else.
type Found[T any] struct {
	// Items are in the page's order; never nil.
	Items []T `json:"data"`
	// Next continues the scan; empty when the range is exhausted.
	Next string `json:"next_cursor"`
	// Scanned is the number of records this page examined.
	Scanned int `json:"scanned"`
}

// Find scans one page of q and keeps the records decode accepts, each
// decoded once: decode says what a record is and whether it is wanted (it
// replaces q.Match).
func Find[T any](ctx context.Context, s *Scanner, q Query, decode func(*kgo.Record) (T, bool)) (Found[T], error) {
	items := make([]T, 0)
	// Scan keeps exactly the records Match accepts, in the order it asks,
	// so items and the page's records stay one to one.
	q.Match = func(r *kgo.Record) bool {
		v, ok := decode(r)
		if ok {
			items = append(items, v)
		}
		return ok
	}
	page, err := s.Scan(ctx, q)
	if err != nil {
		return Found[T]{}, err
	}
	return Found[T]{Items: items, Next: page.Next, Scanned: page.Scanned}, nil
}
