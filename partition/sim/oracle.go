package sim

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/partition"
)

// The oracle. It knows the deliveries log (every accepted element, in
// order), what the receivers answered 2xx, the dead-letter topic and the
// commits, and checks after every step or at the end:
//
//  1. every element is delivered, dead-lettered (with a reason), or
//     superseded by coalescing, where a superseding element counts only if
//     it is itself delivered, dead-lettered or superseded in turn. The
//     rule is the lane's: a state is superseded by the next element of its
//     (endpoint, entity) stream when that is a state of a revision at
//     least as high, or by the element before it when that is a state of a
//     higher revision (an older state arriving late);
//  2. never two attempts of one (endpoint, entity) in flight at once,
//     across owners (checked as attempts start, in driver.go);
//  3. per (endpoint, entity), no first delivery of an element after an
//     element later in the stream was delivered (replays of an event
//     already delivered are duplicates, not disorder; a redrive publishes
//     its elements at the end of the stream);
//  4. no commit, of deliveries or parked, passes unfinished work;
//  5. the owner's memory stays within the bounds its configuration sets;
//  6. liveness: once faults stop, everything drains within drainWithin;
//  7. a pull endpoint's feed, read from its start by a consumer, shows no
//     element for the first time after a later element of its stream.
//     (Feeds are not compacted: compaction by entity kept an old state
//     that a replay appended again as the entity's last record, and a
//     consumer far behind saw it go back; seeds 915 and 7566 of the first
//     10,000 showed it.)

// delivered records a 2xx for element i and checks rule 3.
func (s *Sim) delivered(i int, d *event.Delivery) {
	r := s.receiver
	r.delivered[i]++
	r.lastDelivery = s.now
	e := s.elements[i]
	key := streamKey{e.endpoint, e.entity}
	ek := eventKey{e.event, e.endpoint}
	if !r.deliveredEvents[ek] {
		if max, ok := r.maxPos[key]; ok && max > e.pos {
			if s.retentionTouched(key) {
				s.tracef("rule 3 allowance (retention deleted parked records of %s/%s): element %d (rev %d, position %d) first delivered after position %d",
					key.endpoint, key.entity, i, e.revision, e.pos, max)
			} else {
				s.violate("rule 3: element %d (%s rev %d, position %d) first delivered after position %d of %s/%s",
					i, e.event, e.revision, e.pos, max, key.endpoint, key.entity)
			}
		}
		r.deliveredEvents[ek] = true
	}
	if max, ok := r.maxPos[key]; !ok || e.pos > max {
		r.maxPos[key] = e.pos
	}
	if s.pull[e.endpoint] {
		s.feeds[e.endpoint] = append(s.feeds[e.endpoint], i)
	}
	s.tracef("delivered element %d (%s %s/%s rev %d)", i, e.event, key.endpoint, key.entity, e.revision)
}

// deadLetter records a dead letter that landed in Kafka.
func (s *Sim) deadLetter(dl event.DeadLetter) {
	s.kafka.dead = append(s.kafka.dead, dl)
	if dl.Reason == "" {
		s.violate("rule 1: a dead letter without a reason: %s", dl.ID)
	}
	var e *element
	switch {
	case dl.Delivery != nil:
		if i, ok := elementOf(dl.Delivery); ok {
			e = s.elements[i]
		}
	case strings.HasPrefix(dl.Source, "deliveries/"):
		if o, err := strconv.ParseInt(dl.Source[strings.LastIndex(dl.Source, "/")+1:], 10, 64); err == nil {
			e = s.byOffset[o]
		}
	}
	if e == nil {
		s.violate("rule 1: a dead letter names no element: %s (%s)", dl.ID, dl.Reason)
		return
	}
	s.deadElem[e.index] = true
	s.tracef("dead letter element %d: %s", e.index, dl.Reason)
}

func (s *Sim) settled(e *element) bool {
	return s.ended(e) || s.lostToRetention(e)
}

// ended reports whether e was delivered or dead-lettered.
func (s *Sim) ended(e *element) bool {
	return s.deadElem[e.index] || (!e.invalid && s.receiver.deliveredEvents[eventKey{e.event, e.endpoint}])
}

// lostToRetention reports whether, in a short-retention run, a parked
// record of e was deleted by retention: e may then be lost, and
// finalChecks requires the owners to have counted at least as many expired
// offsets as elements were lost.
func (s *Sim) lostToRetention(e *element) bool {
	return s.p.shortRetention && s.expiredRecordOf(e)
}

// retentionTouched reports whether, in a short-retention run, retention
// deleted a parked record of the stream: what those records told a new
// owner (which deliveries were parked, and up to where each entity was
// finished) went with them, so a replay may deliver one of the stream's
// older revisions after a newer one. The records are counted as expired
// (rule 1) and LanewayParkedExpired fires; docs/reliability.md says so.
func (s *Sim) retentionTouched(key streamKey) bool {
	if !s.p.shortRetention {
		return false
	}
	for _, e := range s.streams[key] {
		if s.expiredRecordOf(e) {
			return true
		}
	}
	return s.expiredMarkerOf(key)
}

// expiredMarkerOf reports whether retention deleted an end marker of the
// stream (its value is the entity): the marker told a new owner that a
// delivery of the entity ended, so without it a replay sends that
// delivery again, after the entity's later ones (seed 13273 of the first
// 20,000: a 413's marker expired while its owner was frozen).
func (s *Sim) expiredMarkerOf(key streamKey) bool {
	for _, lr := range s.kafka.parked[:s.kafka.parkedLogStart] {
		if isEndMarker(lr.rec) && string(lr.rec.Key) == key.endpoint && string(lr.rec.Value) == key.entity {
			return true
		}
	}
	return false
}

// supersededByExpired reports whether a superseding element of e, or one
// of theirs, lost a parked record to retention.
func (s *Sim) supersededByExpired(e *element, seen map[int]bool) bool {
	if seen[e.index] {
		return false
	}
	seen[e.index] = true
	for _, sup := range s.supersedersOf(e) {
		if s.expiredRecordOf(sup) || s.supersededByExpired(sup, seen) {
			return true
		}
	}
	return false
}

// supersededAcrossLost reports whether e is superseded, by an element that
// finished, in its stream as an owner reads it once retention took the
// parked records of elements never delivered. A state, then a fact whose
// record expired, then a newer state: the owner reads the state, finds the
// fact gone (and counts its offset) and coalesces the state into the newer
// one, as it would had the fact never been. What was lost is the fact.
func (s *Sim) supersededAcrossLost(e *element) bool {
	gone := func(x *element) bool { return s.expiredRecordOf(x) && !s.ended(x) }
	for _, sup := range s.supersedersSkipping(e, gone) {
		if s.finished(sup, nil, map[int]bool{}) {
			return true
		}
	}
	return false
}

// expiredRecordOf reports whether retention deleted a parked record of e.
func (s *Sim) expiredRecordOf(e *element) bool {
	for _, lr := range s.kafka.parked[:s.kafka.parkedLogStart] {
		if !isEndMarker(lr.rec) && partition.SrcOffset(lr.rec) == e.offset && string(lr.rec.Key) == e.endpoint {
			return true
		}
	}
	return false
}

// supersedersOf returns the elements that may supersede e by the lane's
// rule, given the order of its stream: walking the stream, a state older
// than the last kept state is dropped for it (an older state arriving late),
// and a kept state is replaced by the next kept element when that is a
// state of a revision at least as high.
func (s *Sim) supersedersOf(e *element) []*element { return s.supersedersSkipping(e, nil) }

// supersedersSkipping is supersedersOf on e's stream without the other
// elements that skip names (all of them kept when skip is nil).
func (s *Sim) supersedersSkipping(e *element, skip func(*element) bool) []*element {
	if e.invalid || !e.coalesce {
		return nil
	}
	var tail *element
	for _, x := range s.streams[streamKey{e.endpoint, e.entity}] {
		if x != e && skip != nil && skip(x) {
			continue
		}
		if tail != nil && tail.coalesce && x.coalesce && x.revision < tail.revision {
			if x == e {
				return []*element{tail}
			}
			continue // dropped: the tail stays
		}
		if tail == e {
			if x.coalesce && x.revision >= e.revision {
				return []*element{x}
			}
			return nil
		}
		tail = x
	}
	return nil
}

// finished reports whether e needs nothing more: settled, or superseded by
// an element that is finished or, when pending is given, still pending.
func (s *Sim) finished(e *element, pending func(*element) bool, seen map[int]bool) bool {
	if s.settled(e) {
		return true
	}
	if seen[e.index] {
		return false
	}
	seen[e.index] = true
	for _, sup := range s.supersedersOf(e) {
		if (pending != nil && pending(sup)) || s.finished(sup, pending, seen) {
			return true
		}
	}
	return false
}

// checkCommit checks rule 4 for a commit about to be made: every delivery
// that a restart from the old commit would still do, and one from the new
// commit would not, is finished.
func (s *Sim) checkCommit(c partition.Commit) {
	k := s.kafka
	liveNow := s.parkedSources(c.Parked)
	// pending: work that a restart would still do from the new commit.
	pending := func(e *element) bool { return e.offset >= c.Deliveries || liveNow[e.offset] }
	check := func(e *element, where string) {
		if !s.finished(e, pending, map[int]bool{}) {
			s.violate("rule 4: the commit (deliveries %d, parked %s) passes element %d (%s %s/%s rev %d at %s), unfinished",
				c.Deliveries, c.Metadata, e.index, e.event, e.endpoint, e.entity, e.revision, where)
		}
	}
	for o := k.deliveriesCommit; o < c.Deliveries; o++ {
		if e := s.byOffset[o]; e != nil && !k.parkedSrc[o] {
			check(e, "deliveries "+strconv.FormatInt(o, 10))
		}
	}
	for o := max(k.parkedProgress.Commit, k.parkedLogStart); o < int64(len(k.parked)); o++ {
		rec := k.parked[o].rec
		if !liveParked(k.parkedProgress, o, rec) || liveParked(c.Parked, o, rec) {
			continue
		}
		if e := s.parkedElement(o); e != nil && e.offset < c.Deliveries && !liveNow[e.offset] {
			check(e, "parked "+strconv.FormatInt(o, 10))
		}
	}
}

// liveParked reports whether a restart from progress p reads the parked
// record at o: an end marker at or above the commit, or a delivery at or
// above its endpoint's progress.
func liveParked(p partition.ParkedProgress, o int64, rec *kgo.Record) bool {
	if o < p.Commit {
		return false
	}
	return isEndMarker(rec) || o >= p.NeedsFrom(string(rec.Key))
}

func isEndMarker(rec *kgo.Record) bool {
	for _, h := range rec.Headers {
		if h.Key == partition.EndHeader {
			return true
		}
	}
	return false
}

// parkedSources returns the deliveries offsets of the parked records a
// restart from progress p reads.
func (s *Sim) parkedSources(p partition.ParkedProgress) map[int64]bool {
	out := map[int64]bool{}
	for o := max(p.Commit, s.kafka.parkedLogStart); o < int64(len(s.kafka.parked)); o++ {
		if rec := s.kafka.parked[o].rec; liveParked(p, o, rec) {
			out[partition.SrcOffset(rec)] = true
		}
	}
	return out
}

func (s *Sim) parkedElement(o int64) *element {
	d, err := event.ParseDelivery(s.kafka.parked[o].rec.Value)
	if err != nil {
		return nil
	}
	i, ok := elementOf(&d)
	if !ok {
		return nil
	}
	return s.elements[i]
}

// allSettled reports whether every element is finished (rule 1).
func (s *Sim) allSettled() bool {
	for _, e := range s.elements {
		if !s.finished(e, nil, map[int]bool{}) {
			return false
		}
	}
	return true
}

// checkFeeds checks rule 7 for every pull endpoint's feed.
func (s *Sim) checkFeeds() {
	for id, feed := range s.feeds {
		seen, maxPos := map[string]bool{}, map[string]int{}
		for _, i := range feed {
			e := s.elements[i]
			if !seen[e.event] {
				if m, ok := maxPos[e.entity]; ok && m > e.pos && !s.retentionTouched(streamKey{id, e.entity}) {
					s.violate("rule 7: the compacted feed of %s shows element %d (%s %s rev %d, position %d) first after position %d",
						id, i, e.event, e.entity, e.revision, e.pos, m)
				}
				seen[e.event] = true
			}
			maxPos[e.entity] = max(maxPos[e.entity], e.pos)
		}
	}
}

// finalChecks checks rules 1, 7 and 13 at the end of the run.
func (s *Sim) finalChecks() {
	s.checkFeeds()
	s.checkDuplicates()
	for _, e := range s.elements {
		if !s.finished(e, nil, map[int]bool{}) {
			s.violate("rule 1: element %d (%s %s/%s rev %d, offset %d) neither delivered, dead-lettered nor superseded",
				e.index, e.event, e.endpoint, e.entity, e.revision, e.offset)
		}
	}
	if !s.p.shortRetention {
		return
	}
	// The elements retention took are those not finished but for it whose
	// own parked record it deleted while it was still needed (not
	// superseded by an element whose record it deleted too: such an
	// element is lost with its successor, and an owner counts only the
	// offsets it still needed): each is at least one expired parked
	// offset, which the owners must have counted.
	s.p.shortRetention = false
	lost := 0
	for _, e := range s.elements {
		if !s.finished(e, nil, map[int]bool{}) && s.expiredRecordOf(e) &&
			!s.supersededByExpired(e, map[int]bool{}) && !s.supersededAcrossLost(e) {
			lost++
		}
	}
	s.p.shortRetention = true
	if lost > s.expiredCounted {
		s.violate("rule 1: %d elements lost to retention, but the owners counted only %d expired parked offsets", lost, s.expiredCounted)
	}
}
