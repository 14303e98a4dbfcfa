package ordercheck

// The pieces of Check: coverage of each stream, overlaps, disorder at the producer.

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

type outcomeKind uint8

const (
	outLost outcomeKind = iota
	outDelivered
	outDead
	outSuperseded
)

// seqEvent is one event of an (endpoint, entity), as coverage sees it.
type seqEvent struct {
	rev       int64
	state     bool      // coalesce: true
	sentAt    time.Time // zero: unknown
	start     time.Time // first request (or receipt) at the receiver; zero: never
	delivered bool
	dead      bool
}

// coverage says, for the events of one (endpoint, entity) in revision
// order, which are handled: delivered, dead-lettered, or superseded. A
// state i is superseded by a later state j that is handled itself
// (transitively) and that could have replaced it: j existed (its SentAt,
// when known, is before) when the first event between i and j started,
// since no event of the entity starts before i has finished. why names,
// for an unhandled state that has handled newer states, what ruled them
// out.
func coverage(evs []seqEvent) (covered []bool, why []string) {
	covered = make([]bool, len(evs))
	why = make([]string, len(evs))
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].delivered || evs[i].dead {
			covered[i] = true
			continue
		}
		if !evs[i].state {
			continue
		}
		var first time.Time // earliest start of an event strictly between i and j
		firstRev := int64(0)
		for j := i + 1; j < len(evs); j++ {
			if evs[j].state && covered[j] {
				if evs[j].sentAt.IsZero() || first.IsZero() || evs[j].sentAt.Before(first) {
					covered[i] = true
					break
				}
				if why[i] == "" {
					why[i] = fmt.Sprintf("newer state rev %d was handled, but sent at %s, after rev %d had started at %s",
						evs[j].rev, evs[j].sentAt.Format(time.RFC3339Nano), firstRev, first.Format(time.RFC3339Nano))
				}
			}
			if s := evs[j].start; !s.IsZero() && (first.IsZero() || s.Before(first)) {
				first, firstRev = s, evs[j].rev
			}
		}
		if covered[i] {
			why[i] = ""
		}
	}
	return covered, why
}

// overlaps counts the requests that reached a receiver while an earlier
// request of the same (endpoint, entity) was still in flight there. A
// request without an answer may have ended for the sender up to
// AbandonGrace before the receiver saw it end.
func (r *Report) overlaps(requests []Receipt) {
	byKey := map[entityKey][]Receipt{}
	for _, q := range requests {
		k := entityKey{q.Endpoint, q.Entity}
		byKey[k] = append(byKey[k], q)
	}
	keys := make([]entityKey, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b entityKey) int {
		return cmp.Or(cmp.Compare(a.endpoint, b.endpoint), cmp.Compare(a.entity, b.entity))
	})
	for _, k := range keys {
		qs := byKey[k]
		slices.SortStableFunc(qs, func(a, b Receipt) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Seq, b.Seq)) })
		var busy Receipt // the earlier request that ends last
		var busyUntil time.Time
		for n, q := range qs {
			if n > 0 && q.At.Before(busyUntil) {
				r.Overlaps++
				r.figures(q.Endpoint).Overlaps++
				if len(r.OverlapSamples) < MaxSamples {
					r.OverlapSamples = append(r.OverlapSamples, fmt.Sprintf(
						"endpoint %s entity %s: request for rev %d (event %s) arrived at %s while rev %d (event %s, arrived %s, status %d) was in flight until %s",
						q.Endpoint, q.Entity, q.Revision, q.EventID, q.At.Format(time.RFC3339Nano), busy.Revision, busy.EventID,
						busy.At.Format(time.RFC3339Nano), busy.Status, busy.Done.Format(time.RFC3339Nano)))
				}
			}
			end := q.Done
			if end.IsZero() {
				end = q.At
			}
			if q.Status == 0 {
				if end = end.Add(-AbandonGrace); end.Before(q.At) {
					end = q.At
				}
			}
			if end.After(busyUntil) {
				busy, busyUntil = q, end
			}
		}
	}
}

func (r *Report) figures(endpoint string) *EndpointFigures {
	f, ok := r.PerEndpoint[endpoint]
	if !ok {
		f = &EndpointFigures{}
		r.PerEndpoint[endpoint] = f
	}
	return f
}

func (r *Report) other(format string, args ...any) {
	if len(r.OtherSamples) < MaxSamples {
		r.OtherSamples = append(r.OtherSamples, fmt.Sprintf(format, args...))
	}
}

// acceptedDisorder counts entities whose accepted revisions do not increase
// with their offsets: the producer's own order, which the order check
// relies on (an entity's events share a partition, so offsets order them).
func acceptedDisorder(accepted []Accepted, rep *Report) int {
	byEntity := map[string][]Accepted{}
	for _, e := range accepted {
		if e.Err == "" {
			byEntity[e.Entity] = append(byEntity[e.Entity], e)
		}
	}
	n := 0
	for entity, evs := range byEntity {
		slices.SortFunc(evs, func(a, b Accepted) int { return cmp.Compare(a.Offset, b.Offset) })
		for i := 1; i < len(evs); i++ {
			if evs[i].Partition != evs[i-1].Partition || evs[i].Revision <= evs[i-1].Revision {
				n++
				rep.other("entity %s: accepted revisions not increasing with offsets (rev %d at %d/%d after rev %d at %d/%d)",
					entity, evs[i].Revision, evs[i].Partition, evs[i].Offset, evs[i-1].Revision, evs[i-1].Partition, evs[i-1].Offset)
				break
			}
		}
	}
	return n
}
