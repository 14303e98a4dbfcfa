// Package deadletter searches the dead-letter topic and redrives dead
// deliveries back onto the deliveries topic.
//
// Dead letters are keyed by endpoint id, so one endpoint's letters sit in one
// partition, in the order they died; a search for one endpoint reads only that
// partition, from the offset Kafka finds for the start of the time range.
// Redrive runs as a background job whose progress lives in Redis; it writes
// an endpoint's letters back in the order they died, which keeps each
// entity's order.
package deadletter

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/logscan"
	"github.com/laneway/laneway/internal/model/event"
)

// Letter is a dead letter and where it sits on the dead topic.
type Letter struct {
	event.DeadLetter
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// Filter selects dead letters. Zero fields match everything.
type Filter struct {
	EndpointID   string
	Reason       string
	Since, Until time.Time
	// IDs, when set, matches only these dead-letter ids.
	IDs map[string]bool
}

// Page is one page of a search.
type Page = logscan.Found[Letter]

// Finder searches the dead topic. It is safe for concurrent use.
type Finder struct {
	topic   string
	scanner *logscan.Scanner
	keys    *logscan.KeyPartitions // dead letters are keyed by endpoint id
}

// NewFinder searches topic through client, which should be the finder's
// own (see kread.NewReader). Dead letters of invalid events are written in
// the fan-out's transactions, so only committed records are read.
func NewFinder(client *kgo.Client, topic string) *Finder {
	return &Finder{
		topic:   topic,
		scanner: logscan.NewCommitted(client, topic),
		keys:    logscan.NewKeyPartitions(kadm.NewClient(client), topic),
	}
}

// Scanned counts the records examined by every search so far.
func (f *Finder) Scanned() int64 { return f.scanner.Scanned() }

// Fetched counts the records fetched from Kafka by every search so far.
func (f *Finder) Fetched() int64 { return f.scanner.Fetched() }

// Find returns one page of dead letters matching filter, continuing from
// cursor when it is not empty.
func (f *Finder) Find(ctx context.Context, filter Filter, cursor string, limit int) (Page, error) {
	q := logscan.Query{Since: filter.Since, Until: filter.Until, Cursor: cursor, Limit: limit}
	parts, err := f.partitionsFor(ctx, filter)
	if err != nil {
		return Page{}, err
	}
	q.Partitions = parts
	return logscan.Find(ctx, f.scanner, q, func(r *kgo.Record) (Letter, bool) {
		l, ok := decode(r)
		return l, ok && filter.matches(l)
	})
}

func decode(r *kgo.Record) (Letter, bool) {
	var l Letter
	if err := json.Unmarshal(r.Value, &l.DeadLetter); err != nil {
		return l, false // not a dead letter: nothing a search can show
	}
	l.Partition, l.Offset = r.Partition, r.Offset
	return l, true
}

func (f Filter) matches(l Letter) bool {
	switch {
	case f.EndpointID != "" && l.EndpointID != f.EndpointID:
		return false
	case f.Reason != "" && l.Reason != f.Reason:
		return false
	case f.IDs != nil && !f.IDs[l.ID]:
		return false
	}
	return true
}

// partitionsFor narrows the search to the partitions the filter's
// endpoints hash to; nil means all.
func (f *Finder) partitionsFor(ctx context.Context, filter Filter) ([]int32, error) {
	var keys []string
	switch {
	case filter.EndpointID != "":
		keys = []string{filter.EndpointID}
	case filter.IDs != nil:
		for id := range filter.IDs {
			ep, ok := EndpointOf(id)
			if !ok {
				return nil, nil // an id we cannot place: search everywhere
			}
			keys = append(keys, ep)
		}
	default:
		return nil, nil
	}
	return f.keys.Of(ctx, keys...)
}

// EndpointOf returns the endpoint part of a dead-letter id
// ("<event id>:<endpoint id>").
func EndpointOf(id string) (string, bool) {
	i := strings.LastIndexByte(id, ':')
	if i <= 0 || i == len(id)-1 {
		return "", false
	}
	return id[i+1:], true
}
