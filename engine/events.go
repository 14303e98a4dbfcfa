package engine

import (
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/partition"
)

// EventKind names what a stage did.
type EventKind string

// The events of DeliveryConfig.OnEvent and FanoutConfig.OnEvent.
const (
	// EventAssigned: a deliveries partition was taken over (its parked
	// partition is read next). Partition is set.
	EventAssigned EventKind = "assigned"
	// EventReleased: a deliveries partition was given up. Partition is set.
	EventReleased EventKind = "released"
	// EventCommitted: a partition's watermark (Offset) and parked progress
	// were committed.
	EventCommitted EventKind = "committed"
	// EventLaneParked: an endpoint's lane was parked, for Reason
	// (park_after, lane_buffer, lane_bytes, instance_bytes, paused,
	// breaker).
	EventLaneParked EventKind = "lane_parked"
	// EventLaneUnparked: a parked lane's backlog is finished; its new
	// deliveries flow directly again.
	EventLaneUnparked EventKind = "lane_unparked"
	// EventAttempt: an attempt to Endpoint ended with outcome Reason
	// (delivered, retry, dead, canceled, ...).
	EventAttempt EventKind = "attempt"
	// EventBreakerOpened: an attempt's failure opened Endpoint's breaker:
	// the failures reached the threshold, or a probe failed and the pause
	// doubled. A breaker a new owner loads open from Redis is not told.
	EventBreakerOpened EventKind = "breaker_opened"
	// EventBreakerClosed: Endpoint's open or probing breaker closed: an
	// attempt succeeded, or the endpoint was re-enabled.
	EventBreakerClosed EventKind = "breaker_closed"
	// EventLeaseRevoked: the group answered a fence heartbeat saying that
	// it no longer counts this member in (fence.go): no attempt starts on
	// any partition until the member rejoins. Reason is the error.
	EventLeaseRevoked EventKind = "lease_revoked"
	// EventFannedOut (fan-out stage): a transaction committed Count
	// deliveries to deliveries partition Partition, the last of them at
	// Offset-1 (Offset is the next offset, as a commit's). A transaction
	// that wrote to several partitions is one event for each.
	EventFannedOut EventKind = "fanned_out"
)

// Event is one thing a stage did. The stages call their OnEvent hook
// synchronously, on their own goroutines and some calls under a
// partition's lock: the hook must not block (record the event and
// return) and must not call the stage. Without a hook an event costs a nil
// check.
type Event struct {
	Kind      EventKind
	Partition int32
	Endpoint  string // lane, attempt and breaker events
	Reason    string // EventLaneParked: why; EventAttempt: the outcome
	Offset    int64  // EventCommitted, EventFannedOut
	Count     int    // EventFannedOut: deliveries written
}

// emit tells the OnEvent hook, if any.
func (s *DeliveryStage) emit(e Event) {
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(e)
	}
}

// breakersFor returns the breakers partition p's owner uses: none without
// Breakers (nil as an interface value too), and with an OnEvent hook the
// Breakers wrapped to tell it when a breaker opens or closes. Only then:
// the wrapper reads each breaker before recording an outcome, which the
// delivery path does not pay for without a hook.
func (s *DeliveryStage) breakersFor(p int32) partition.Breakers {
	switch {
	case s.cfg.Breakers == nil:
		return nil
	case s.cfg.OnEvent != nil:
		return eventBreakers{Breakers: s.cfg.Breakers, partition: p, onEvent: s.cfg.OnEvent}
	}
	return s.cfg.Breakers
}

// eventBreakers tells onEvent about the breaker changes the owner of one
// partition makes: it records outcomes and resets breakers (an endpoint is
// owned by one partition, under its lock, so nothing changes a breaker
// between the read and the write here).
type eventBreakers struct {
	Breakers
	partition int32
	onEvent   func(Event)
}

func (b eventBreakers) Record(endpointID string, success bool, now time.Time) breaker.Breaker {
	before := b.Breakers.Get(endpointID).State
	after := b.Breakers.Record(endpointID, success, now)
	switch {
	case after.State == breaker.Open && before != breaker.Open:
		b.tell(EventBreakerOpened, endpointID)
	case paused(before) && !paused(after.State):
		b.tell(EventBreakerClosed, endpointID)
	}
	return after
}

func (b eventBreakers) Reset(endpointID string) {
	before := b.Breakers.Get(endpointID).State
	b.Breakers.Reset(endpointID)
	if paused(before) {
		b.tell(EventBreakerClosed, endpointID)
	}
}

func (b eventBreakers) tell(kind EventKind, endpointID string) {
	b.onEvent(Event{Kind: kind, Partition: b.partition, Endpoint: endpointID})
}

// paused reports whether a breaker in state s holds the endpoint's
// attempts back (open, or probing after a pause; any state but closed):
// what the laneway_endpoint_breaker_open gauge shows as 1.
func paused(s breaker.State) bool { return s != "" && s != breaker.Closed }
