package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/laneway/laneway/internal/testkit/benchrecv"
	"github.com/laneway/laneway/receiver"
)

// eventType is the type of every benchmark event; endpoints subscribe to all types.
const eventType = "order.updated"

// schedule decides every event of a run up front, so the receiver can tell
// from a webhook-id alone which delivery it is looking at:
//
//   - event seq has id "e<seq>" and entity seq mod entities, so an entity's
//     events are seq = e, e+entities, … with revisions 1, 2, …;
//   - entity e belongs to tenant e mod tenants;
//   - each tenant has fanout endpoints, endpoint n being number n mod fanout
//     of tenant n / fanout, so every event makes exactly fanout deliveries;
//   - delivery slot = seq × fanout + (n mod fanout).
type schedule struct {
	events, entities, tenants, fanout int
	data                              []byte // every event's data, padded to the requested size
}

func newSchedule(cfg config) schedule {
	return schedule{
		events: cfg.Events, entities: cfg.Entities, tenants: cfg.Endpoints / cfg.Fanout, fanout: cfg.Fanout,
		data: []byte(`{"pad":"` + strings.Repeat("x", max(cfg.DataBytes-10, 0)) + `"}`),
	}
}

func (s schedule) deliveries() int               { return s.events * s.fanout }
func (s schedule) entity(seq int) int            { return seq % s.entities }
func (s schedule) revision(seq int) int64        { return int64(seq/s.entities) + 1 }
func (s schedule) tenantOfEntity(entity int) int { return entity % s.tenants }
func (s schedule) tenantOfEndpoint(n int) int    { return n / s.fanout }
func (s schedule) slot(seq, endpoint int) int    { return seq*s.fanout + endpoint%s.fanout }
func tenantName(t int) string                    { return "tenant-" + strconv.Itoa(t) }
func entityName(e int) string                    { return "order:" + strconv.Itoa(e) }
func eventID(seq int) string                     { return "e" + strconv.Itoa(seq) }
func (s schedule) warmupDeliveries() int         { return s.tenants * s.fanout }
func (s schedule) entityKey(seq int) []byte      { return []byte(entityName(s.entity(seq))) }
func (s schedule) tenantOfEvent(seq int) int     { return s.tenantOfEntity(s.entity(seq)) }

// lookup maps a request to endpoint n back to its delivery; ids that are not
// measured events (warmup, or an event for another tenant) are not known.
func (s schedule) lookup(endpoint int, msgID string) (benchrecv.Delivery, bool) {
	rest, ok := strings.CutPrefix(msgID, "e")
	seq, err := strconv.Atoi(rest)
	if !ok || err != nil || seq < 0 || seq >= s.events || s.tenantOfEvent(seq) != s.tenantOfEndpoint(endpoint) {
		return benchrecv.Delivery{}, false
	}
	return benchrecv.Delivery{Slot: s.slot(seq, endpoint), Entity: s.entity(seq), Revision: s.revision(seq)}, true
}

// eventValue is the record value of event seq, occurring at.
func (s schedule) eventValue(seq int, at time.Time) []byte {
	e := s.entity(seq)
	return appendEnvelope(nil, eventID(seq), tenantName(s.tenantOfEntity(e)), entityName(e), s.revision(seq), false, at, s.data)
}

// warmupValue is the warmup event of tenant t: an id and entity of their own,
// so the receiver does not count it as a measured delivery.
func (s schedule) warmupValue(t int, at time.Time) []byte {
	return appendEnvelope(nil, "w"+strconv.Itoa(t), tenantName(t), "warmup:"+strconv.Itoa(t), 1, false, at, s.data)
}

// appendEnvelope writes an event envelope by hand: the publisher runs on the
// same cores as Laneway, and encoding/json would cost it several times more.
// Every string here is generated ASCII that needs no escaping. coalesce
// makes the event a state update rather than a fact.
func appendEnvelope(b []byte, id, tenant, entity string, revision int64, coalesce bool, at time.Time, data []byte) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","type":"`+eventType+`","tenant":"`...)
	b = append(b, tenant...)
	b = append(b, `","entity":"`...)
	b = append(b, entity...)
	b = append(b, `","revision":`...)
	b = strconv.AppendInt(b, revision, 10)
	if coalesce {
		b = append(b, `,"coalesce":true`...)
	}
	b = append(b, `,"occurred_at":"`...)
	b = at.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","data":`...)
	b = append(b, data...)
	return append(b, '}')
}

// sampleBody is a delivery body of the size Laneway sends, for the baseline.
func (s schedule) sampleBody() []byte {
	seq := s.events / 2
	body, _ := json.Marshal(receiver.Delivery{
		ID: eventID(seq), Type: eventType, Timestamp: time.Now().UTC(), Data: s.data,
		Entity: receiver.Entity{ID: entityName(s.entity(seq)), Revision: s.revision(seq)},
	})
	return body
}
