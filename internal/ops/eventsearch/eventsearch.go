// Package eventsearch answers "did you send it?": it lists the events
// accepted on the events topic by time range, tenant and type, for
// reconciliation. It reads only the time range, found with Kafka's
// offsets-by-timestamp, never the topic from its beginning.
package eventsearch

import (
	"context"
	"encoding/json"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/logscan"
	"github.com/laneway/laneway/internal/model/event"
)

// Filter selects events. Zero fields match everything. Since and Until
// bound the time Kafka accepted the event (the record timestamp).
type Filter struct {
	Tenant, Type, Entity string
	Since, Until         time.Time
}

// Event is an accepted event and where it sits.
type Event struct {
	event.Envelope
	AcceptedAt time.Time `json:"accepted_at"`
	Partition  int32     `json:"partition"`
	Offset     int64     `json:"offset"`
}

// Page is one page of results.
type Page = logscan.Found[Event]

// Finder searches the events topic. It is safe for concurrent use.
type Finder struct{ scanner *logscan.Scanner }

// New searches topic through client, which should be the finder's own.
// Events may be written in transactions (the inbound front door), so only
// committed records are read.
func New(client *kgo.Client, topic string) *Finder {
	return &Finder{scanner: logscan.NewCommitted(client, topic)}
}

// Scanned counts the records examined by every search so far.
func (f *Finder) Scanned() int64 { return f.scanner.Scanned() }

// Fetched counts the records fetched from Kafka by every search so far.
func (f *Finder) Fetched() int64 { return f.scanner.Fetched() }

// Find returns one page of events matching filter, continuing from cursor.
func (f *Finder) Find(ctx context.Context, filter Filter, cursor string, limit int) (Page, error) {
	q := logscan.Query{Since: filter.Since, Until: filter.Until, Cursor: cursor, Limit: limit}
	return logscan.Find(ctx, f.scanner, q, func(r *kgo.Record) (Event, bool) {
		e, ok := decode(r)
		return e, ok && filter.matches(e.Envelope)
	})
}

// decode reads an event record leniently: a record that is not an envelope
// at all is skipped (it went to dead letters as invalid_event).
func decode(r *kgo.Record) (Event, bool) {
	var e Event
	if err := json.Unmarshal(r.Value, &e.Envelope); err != nil {
		return e, false
	}
	e.AcceptedAt, e.Partition, e.Offset = r.Timestamp.UTC(), r.Partition, r.Offset
	return e, true
}

func (f Filter) matches(e event.Envelope) bool {
	return (f.Tenant == "" || e.Tenant == f.Tenant) && (f.Type == "" || e.Type == f.Type) &&
		(f.Entity == "" || e.Entity == f.Entity)
}
