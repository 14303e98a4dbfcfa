// Package ordercheck is the independent checker of Laneway's delivery
// guarantees. It knows nothing of Laneway's internals: it reads what a
// producer says Kafka accepted, which endpoints were subscribed to what, what
// the receivers accepted (in the order they saw it) and what the dead-letter
// topic holds, and reports
//
//   - lost: an accepted event that was neither delivered to each subscribed
//     endpoint, nor dead-lettered for it with a reason, nor superseded by
//     coalescing. This applies to every revision of an entity, not only its
//     last. A state event (coalesce: true) is superseded for an endpoint by
//     a later state revision of the same entity that is itself delivered to
//     that endpoint, dead-lettered for it, or superseded in turn by the same
//     rule (transitively), and only if that later revision could have
//     replaced it: Laneway coalesces a state that has not finished, so the
//     later revision must have existed (been sent by the producer, when the
//     accepted log says when: Accepted.SentAt) before any event of the
//     (endpoint, entity) between the two started (its first request reached
//     the receiver) — an event in between cannot start before the earlier
//     state has finished. Facts (coalesce: false) are never superseded, and
//     never supersede;
//   - order violations: for one (endpoint, entity), a first delivery of
//     revision r after the first delivery of a revision above r (replays of
//     an event already delivered are duplicates, not disorder), facts and
//     states alike;
//   - overlaps: for one (endpoint, entity), a request that reached the
//     receiver while an earlier one was still in flight there (from the
//     request log, Input.Requests, when the receivers keep one): Laneway
//     never has two deliveries of one entity in flight to one endpoint;
//   - duplicates: deliveries of an (endpoint, event) beyond its first,
//     counted and reported (at least once allows them).
//
// It also counts what should never happen at all: deliveries to an endpoint
// that was not subscribed to the event, and bodies whose entity or revision
// differ from the event's.
//
// Check is pure; the loaders read the NDJSON files the chaos harness writes
// (and any other producer or receiver can write), and ReadDeadTopic reads a
// dead-letter topic from its start to its end.
package ordercheck

import (
	"fmt"
	"slices"
	"time"
)

// Accepted is one event the producer published: accepted by Kafka when Err
// is empty (acks=all, with its partition and offset), otherwise a publish
// whose outcome the producer does not know. Events with an Err are never
// counted as lost, and their deliveries are not unexpected.
type Accepted struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Type      string    `json:"type"`
	Entity    string    `json:"entity"`
	Revision  int64     `json:"rev"`
	Coalesce  bool      `json:"coalesce,omitempty"`
	Partition int32     `json:"p"`
	Offset    int64     `json:"o"`
	AckedAt   time.Time `json:"acked_at"`
	// SentAt is when the producer handed the event to its Kafka client:
	// Laneway cannot have known the event before. Zero when unknown; it
	// must come from the same clock as the receipts' and requests' At.
	SentAt time.Time `json:"sent_at,omitzero"`
	Err    string    `json:"err,omitempty"`
}

// Endpoint is one endpoint's subscription: events of Tenant whose type is in
// EventTypes (every type when empty) go to it.
type Endpoint struct {
	ID         string   `json:"id"`
	Name       string   `json:"name,omitempty"`
	Tenant     string   `json:"tenant"`
	EventTypes []string `json:"event_types,omitempty"`
}

// Subscribes reports whether the endpoint should receive e.
func (ep Endpoint) Subscribes(e Accepted) bool {
	return ep.Tenant == e.Tenant && (len(ep.EventTypes) == 0 || slices.Contains(ep.EventTypes, e.Type))
}

// Receipt is one delivery a receiver accepted (answered 2xx). Seq orders the
// receipts of one receiver log by arrival; At is the arrival time, Done
// when the receiver had its answer ready (before it was sent). A request
// log (Input.Requests) holds the same records for every request, answered
// or not: Status 0 when none was sent (the sender gave up, or the
// connection was reset).
type Receipt struct {
	Endpoint string    `json:"ep"`
	EventID  string    `json:"id"`
	Entity   string    `json:"entity"`
	Revision int64     `json:"rev"`
	Seq      int64     `json:"seq"`
	At       time.Time `json:"at"`
	Done     time.Time `json:"done,omitzero"`
	Status   int       `json:"status,omitempty"`
}

// Dead is one dead letter of a delivery: the endpoint, the event and why.
type Dead struct {
	Endpoint string    `json:"ep"`
	EventID  string    `json:"id"`
	Entity   string    `json:"entity"`
	Revision int64     `json:"rev"`
	Reason   string    `json:"reason"`
	Detail   string    `json:"detail,omitempty"`
	DeadAt   time.Time `json:"dead_at,omitzero"`
}

// Input is everything Check looks at.
type Input struct {
	Accepted  []Accepted
	Endpoints []Endpoint
	Receipts  []Receipt
	Dead      []Dead
	// Requests, when the receivers log them, are every verified request
	// with its arrival (At) and end (Done): the overlap check reads them,
	// and the supersession rule takes an event's start from its first
	// request (else from its first receipt). Optional.
	Requests []Receipt
}

// AbandonGrace is how much earlier than the receiver noticed it a request
// without an answer (Status 0) may have ended for the sender: a receiver
// learns that the sender gave up only when the closed connection reaches
// it, so the overlap check does not count a next request arriving within
// this of that moment.
const AbandonGrace = 50 * time.Millisecond

// Report is Check's verdict. Pass requires Lost, OrderViolations,
// Overlaps, Misrouted and Mismatched to be 0.
type Report struct {
	Events     int `json:"events"`     // accepted events
	Unacked    int `json:"unacked"`    // publishes with an unknown outcome (not counted)
	Expected   int `json:"expected"`   // (event, subscribed endpoint) pairs of accepted events
	Delivered  int `json:"delivered"`  // expected pairs delivered at least once
	DeadPairs  int `json:"dead"`       // expected pairs not delivered, dead-lettered with a reason
	Superseded int `json:"superseded"` // expected pairs neither, superseded by a later state revision
	Lost       int `json:"lost"`

	Receipts        int `json:"receipts"`         // receipts read
	Duplicates      int `json:"duplicates"`       // receipts beyond the first per (endpoint, event)
	DuplicatedPairs int `json:"duplicated_pairs"` // (endpoint, event) pairs received more than once
	OrderViolations int `json:"order_violations"`
	Requests        int `json:"requests"`   // requests in the request log (0: none was given)
	Overlaps        int `json:"overlaps"`   // requests that arrived while another of their (endpoint, entity) was in flight
	Misrouted       int `json:"misrouted"`  // receipts at an endpoint not subscribed to the event, or of unknown events
	Mismatched      int `json:"mismatched"` // receipts whose entity or revision differ from the event's

	DeadLetters     int `json:"dead_letters"`      // dead letters of this run's endpoints
	DeadNoReason    int `json:"dead_no_reason"`    // dead letters without a reason (not counted as handled)
	DeadDelivered   int `json:"dead_delivered"`    // expected pairs both delivered and dead-lettered
	OutOfOrderInLog int `json:"accepted_disorder"` // an entity's revisions not increasing with its offsets in the accepted log

	// Samples of each problem, at most MaxSamples of each.
	LostSamples      []string `json:"lost_samples,omitempty"`
	ViolationSamples []string `json:"violation_samples,omitempty"`
	OverlapSamples   []string `json:"overlap_samples,omitempty"`
	OtherSamples     []string `json:"other_samples,omitempty"`
	// PerEndpoint breaks the figures down by endpoint id.
	PerEndpoint map[string]*EndpointFigures `json:"per_endpoint,omitempty"`
}

// EndpointFigures is Report's breakdown for one endpoint.
type EndpointFigures struct {
	Name            string `json:"name,omitempty"`
	Expected        int    `json:"expected"`
	Delivered       int    `json:"delivered"`
	Dead            int    `json:"dead"`
	Superseded      int    `json:"superseded"`
	Lost            int    `json:"lost"`
	Duplicates      int    `json:"duplicates"`
	OrderViolations int    `json:"order_violations"`
	Overlaps        int    `json:"overlaps"`
}

// MaxSamples bounds the examples a report lists per problem.
const MaxSamples = 20

// Pass reports whether nothing was lost, nothing was out of order, no two
// requests of one (endpoint, entity) were in flight at once and nothing
// arrived where it should not have.
func (r *Report) Pass() bool {
	return r.Lost == 0 && r.OrderViolations == 0 && r.Overlaps == 0 && r.Misrouted == 0 && r.Mismatched == 0
}

// String is a one-line summary.
func (r *Report) String() string {
	verdict := "PASS"
	if !r.Pass() {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s: %d events, %d expected deliveries: %d delivered, %d dead-lettered, %d superseded, %d lost; "+
		"%d receipts, %d duplicates, %d order violations, %d overlaps (of %d requests), %d misrouted, %d mismatched",
		verdict, r.Events, r.Expected, r.Delivered, r.DeadPairs, r.Superseded, r.Lost,
		r.Receipts, r.Duplicates, r.OrderViolations, r.Overlaps, r.Requests, r.Misrouted, r.Mismatched)
}
