package sim

import (
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/partition"
)

// streamElem is one element of a hand-built stream: a state (coalesce) or
// a fact, at a revision.
type streamElem struct {
	state bool
	rev   int64
}

// retentionEnd builds the end of a short-retention run by hand: one stream
// ep/e whose every element was parked (parked offset i holds element i),
// retention having deleted the parked records below logStart, the owners
// having counted counted expired offsets and the receiver having answered
// the elements delivered.
func retentionEnd(stream []streamElem, logStart int64, counted int, delivered ...int) *Sim {
	s := &Sim{
		p:              params{shortRetention: true},
		kafka:          &kafka{parkedLogStart: logStart},
		receiver:       &receiver{deliveredEvents: map[eventKey]bool{}},
		streams:        map[streamKey][]*element{},
		deadElem:       map[int]bool{},
		expiredCounted: counted,
	}
	key := streamKey{"ep", "e"}
	for i, x := range stream {
		e := &element{index: i, offset: int64(i), event: "ev" + strconv.Itoa(i), endpoint: "ep", entity: "e",
			revision: x.rev, coalesce: x.state, pos: i}
		s.elements = append(s.elements, e)
		s.streams[key] = append(s.streams[key], e)
		rec := &kgo.Record{Key: []byte("ep"), Headers: []kgo.RecordHeader{
			{Key: partition.SrcHeader, Value: []byte(strconv.Itoa(i))},
		}}
		s.kafka.parked = append(s.kafka.parked, logRecord{rec: rec})
	}
	for _, i := range delivered {
		s.receiver.deliveredEvents[eventKey{"ev" + strconv.Itoa(i), "ep"}] = true
	}
	return s
}

// lostViolation is the rule 1 retention count's violation, if any.
func lostViolation(s *Sim) string {
	s.finalChecks()
	for _, v := range s.violations {
		if strings.Contains(v, "lost to retention") {
			return v
		}
	}
	return ""
}

// A state, then a fact whose parked record retention took, then a newer
// state that was delivered: the owner that read the first state found the
// fact gone, counted its offset, and coalesced the state into the newer
// one. One element was lost, and one offset counted (seed 77643).
func TestRetentionCountsTheFactNotTheStateCoalescedAcrossIt(t *testing.T) {
	stream := []streamElem{{state: true}, {state: false}, {state: true}}
	if v := lostViolation(retentionEnd(stream, 2, 1, 2)); v != "" {
		t.Fatalf("the state coalesced across the expired fact was counted as lost: %s", v)
	}
}

// What follows the expired fact cannot replace the state (a fact, or an
// older revision of the state): the state is lost too, and one counted
// offset does not cover two lost elements.
func TestRetentionCountsAStateNothingReplaced(t *testing.T) {
	for name, stream := range map[string][]streamElem{
		"a fact after the gap":         {{state: true}, {state: false}, {state: false}},
		"an older state after the gap": {{state: true, rev: 5}, {state: false}, {state: true, rev: 3}},
	} {
		t.Run(name, func(t *testing.T) {
			v := lostViolation(retentionEnd(stream, 2, 1, 2))
			if !strings.Contains(v, "2 elements lost to retention") {
				t.Fatalf("want 2 elements lost against 1 counted offset, got violation %q", v)
			}
		})
	}
}

// A stream whose end marker retention deleted is touched by retention
// (rules 3 and 7 are not checked for it); another stream is not.
func TestRetentionTouchesTheStreamOfAnExpiredEndMarker(t *testing.T) {
	s := retentionEnd([]streamElem{{true, 1}}, 1, 0)
	s.kafka.parked[0] = logRecord{rec: &kgo.Record{Key: []byte("ep"), Value: []byte("e"), Headers: []kgo.RecordHeader{
		{Key: partition.SrcHeader, Value: []byte("0")}, {Key: partition.EndHeader, Value: []byte("-1")},
	}}}
	if !s.retentionTouched(streamKey{"ep", "e"}) {
		t.Fatal("the stream whose end marker expired is not counted as touched by retention")
	}
	if s.retentionTouched(streamKey{"ep", "other"}) {
		t.Fatal("a stream with no expired record is counted as touched by retention")
	}
}
