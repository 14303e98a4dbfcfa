package engine

// EventKind names what the delivery stage did.
type EventKind string

// The events of DeliveryConfig.OnEvent.
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
)

// Event is one thing the delivery stage did.
type Event struct {
	Kind      EventKind
	Partition int32
	Endpoint  string // lane events
	Reason    string // EventLaneParked: why; EventAttempt: the outcome
	Offset    int64  // EventCommitted
}

// emit tells the OnEvent hook, if any.
func (s *DeliveryStage) emit(e Event) {
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(e)
	}
}
