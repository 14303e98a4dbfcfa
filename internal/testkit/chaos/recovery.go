package chaos

import (
	"cmp"
	"slices"
	"time"

	"github.com/laneway/laneway/internal/testkit/ordercheck"
)

// pairTimes is one (event, subscribed endpoint) pair: when Kafka
// acknowledged the event and when the endpoint had it (done).
type pairTimes struct {
	acked, done time.Time // done is zero when the pair never ended
}

// pairs returns the pairs of the endpoints in ids. A pair is done at the
// first receipt of its event, or at its dead letter, or, for a state event,
// at the first receipt of a newer state of its entity (from then on the
// receiver had that state or a newer one: coalescing).
func pairs(in ordercheck.Input, endpoints []string) []pairTimes {
	type key struct{ ep, id string }
	first := map[key]time.Time{}
	for _, r := range in.Receipts {
		k := key{r.Endpoint, r.EventID}
		if t, ok := first[k]; !ok || r.At.Before(t) {
			first[k] = r.At
		}
	}
	for _, d := range in.Dead {
		k := key{d.Endpoint, d.EventID}
		if t, ok := first[k]; !ok || d.DeadAt.Before(t) {
			first[k] = d.DeadAt
		}
	}
	var out []pairTimes
	for _, ep := range in.Endpoints {
		if !slices.Contains(endpoints, ep.ID) {
			continue
		}
		byEntity := map[string][]ordercheck.Accepted{}
		for _, e := range in.Accepted {
			if e.Err == "" && ep.Subscribes(e) {
				byEntity[e.Entity] = append(byEntity[e.Entity], e)
			}
		}
		for _, evs := range byEntity {
			slices.SortFunc(evs, func(a, b ordercheck.Accepted) int { return cmp.Compare(b.Revision, a.Revision) }) // newest first
			var newerState time.Time                                                                                // earliest end of a newer state event
			for _, e := range evs {
				done := first[key{ep.ID, e.ID}]
				if e.Coalesce && !newerState.IsZero() && (done.IsZero() || newerState.Before(done)) {
					done = newerState
				}
				out = append(out, pairTimes{acked: e.AckedAt, done: done})
				if e.Coalesce && !done.IsZero() && (newerState.IsZero() || done.Before(newerState)) {
					newerState = done
				}
			}
		}
	}
	return out
}

// Recovery sets each fault's Recovery and Late. A pair (event, endpoint) is
// overdue from lateAfter after Kafka acknowledged its event until it is
// done (see pairs); a fault's recovery runs from the fault to the last
// moment, before the next fault, at which some pair of the fault's Measure
// endpoints was overdue: the time until deliveries were on time again (0
// when nothing was overdue). It includes the outage of a fault that takes a
// process or service away. Late counts the overdue pairs. A fault followed
// by the next one before it recovered has its recovery cut at the next
// fault. Pairs never done (lost) count as overdue up to the next fault, or
// up to end (the end of the drain) for the last one, whose Recovered is
// then false.
func Recovery(faults []Fault, in ordercheck.Input, ids map[string]string, lateAfter time.Duration, end time.Time) {
	order := make([]int, len(faults))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return faults[a].At.Compare(faults[b].At) })
	cache := map[string][]pairTimes{}
	for k, i := range order {
		f := &faults[i]
		next := end
		if k+1 < len(order) {
			next = faults[order[k+1]].At
		}
		key := slices.Clone(f.Measure)
		slices.Sort(key)
		ps, ok := cache[joinNames(key)]
		if !ok {
			ps = pairs(in, namesToIDs(ids, f.Measure))
			cache[joinNames(key)] = ps
		}
		f.Recovery, f.Late, f.Recovered = 0, 0, true
		for _, p := range ps {
			overdueFrom := p.acked.Add(lateAfter)
			done := p.done
			if !p.done.IsZero() && !p.done.After(overdueFrom) {
				continue // on time
			}
			if !done.After(f.At) && !done.IsZero() {
				continue // overdue wholly before the fault
			}
			if !overdueFrom.Before(next) {
				continue // overdue only from the next fault on
			}
			if done.IsZero() || done.After(next) {
				if done.IsZero() && k+1 == len(order) {
					f.Recovered = false // still overdue when the run ended
				}
				done = next // cut at the next fault (or the end)
			}
			f.Late++
			f.Recovery = max(f.Recovery, done.Sub(f.At))
		}
	}
}

func joinNames(names []string) string {
	out := ""
	for _, n := range names {
		out += n + "\x00"
	}
	return out
}

// LatencyStats summarise how long after Kafka acknowledged an event the
// endpoint had it (see pairs).
type LatencyStats struct {
	Count int           `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Latencies measures the pairs of the endpoints in ids that were done.
func Latencies(in ordercheck.Input, endpoints []string) LatencyStats {
	var ls []time.Duration
	for _, p := range pairs(in, endpoints) {
		if !p.done.IsZero() {
			ls = append(ls, max(0, p.done.Sub(p.acked)))
		}
	}
	if len(ls) == 0 {
		return LatencyStats{}
	}
	slices.SortFunc(ls, cmp.Compare)
	q := func(p float64) time.Duration { return ls[min(len(ls)-1, int(p*float64(len(ls))))] }
	return LatencyStats{Count: len(ls), P50: q(0.5), P99: q(0.99), Max: ls[len(ls)-1]}
}
