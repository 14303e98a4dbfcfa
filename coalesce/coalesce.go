// Package coalesce holds the rule that lets a newer state update of an entity
// replace one that is still waiting to be delivered, so a stalled endpoint's
// queue grows with the number of entities rather than with the number of
// changes.
//
// Only events that describe state (coalesce: true) are merged; facts are
// never merged. The rule is pure: callers decide which pending event to ask
// about (for a lane, the last one of the entity that has not started).
package coalesce

// Version is the part of an event the rule looks at.
type Version struct {
	Revision int64
	Coalesce bool // the event describes the entity's state, not a fact
}

// Decision says what to do with an incoming event given the entity's last
// pending one.
type Decision uint8

const (
	// Append queues the incoming event behind the pending one. It is the zero
	// value so that a forgotten decision never loses an event.
	Append Decision = iota
	// ReplacePending puts the incoming event in the pending one's place; the
	// pending one is superseded and counts as done.
	ReplacePending
	// DropIncoming supersedes the incoming event: the pending one already
	// carries a newer state, and delivering the older one after it would
	// move the receiver backwards.
	DropIncoming
)

func (d Decision) String() string {
	switch d {
	case Append:
		return "append"
	case ReplacePending:
		return "replace_pending"
	case DropIncoming:
		return "drop_incoming"
	default:
		return "unknown"
	}
}

// Decide applies the rule to pending, an event of the entity that has not
// started, and incoming, the next event of the same entity.
//
// An equal revision replaces the pending event: it is a replay or duplicate
// of the same state, and keeping the later copy keeps one delivery instead
// of two.
func Decide(pending, incoming Version) Decision {
	if !pending.Coalesce || !incoming.Coalesce {
		return Append
	}
	if incoming.Revision >= pending.Revision {
		return ReplacePending
	}
	return DropIncoming
}
