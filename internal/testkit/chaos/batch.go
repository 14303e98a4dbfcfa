package chaos

import (
	"fmt"
	"maps"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/receiver"
)

// BatchReport is what CheckBatches found in what one batch endpoint's
// receiver accepted. Read counts the events accepted, duplicates included;
// Missing the published events neither accepted nor dead-lettered.
type BatchReport struct {
	FeedReport
	Batches  int
	Largest  int            // events in the largest batch
	Dead     map[string]int // distinct events dead-lettered, by reason
	Sequence int64          // the highest sequence accepted or dead-lettered
}

func (r BatchReport) String() string {
	return fmt.Sprintf("%d batches (largest %d events), sequences up to %d, dead letters %v; %s", r.Batches, r.Largest, r.Sequence, r.Dead, r.FeedReport)
}

// CheckBatches checks the batches a batch endpoint's receiver accepted, in
// the order it accepted them, and the endpoint's dead letters, against
// the facts published to its tenant: no batch above maxEvents; the
// sequence of each event accepted for the first time above every sequence
// accepted before it (one order for the whole endpoint; a batch sent
// again after a crash, or an event appended again, repeats ids accepted
// before, which is allowed); an entity's revisions rising likewise; every
// event accepted was published; every sequence up to the highest one
// either accepted or dead-lettered (no gap); and every unambiguous
// published event accepted or dead-lettered (nothing lost).
func CheckBatches(published []FeedPublished, batches [][]receiver.FeedEvent, dead []event.DeadLetter, maxEvents int) BatchReport {
	r := BatchReport{Batches: len(batches), Dead: map[string]int{}}
	problem := problemList(&r.Problems)
	byID, ambiguous := publishedByID(published)
	r.Ambiguous += ambiguous
	seen := map[string]bool{}
	newest := map[string]int64{}
	covered := map[int64]bool{}
	last := int64(0) // the highest sequence first accepted
	for i, b := range batches {
		r.Largest = max(r.Largest, len(b))
		if len(b) > maxEvents {
			problem("size", "batch %d holds %d events, above max_events %d", i, len(b), maxEvents)
		}
		for _, ev := range b {
			r.Read++
			covered[ev.Sequence] = true
			if p, ok := byID[ev.ID]; !ok || p.Entity != ev.Entity.ID || p.Revision != ev.Entity.Revision {
				problem("unknown", "%s (%s revision %d) at %d was not published so", ev.ID, ev.Entity.ID, ev.Entity.Revision, ev.Sequence)
			}
			if seen[ev.ID] {
				r.Duplicates++
				continue
			}
			if ev.Sequence <= last {
				problem("order", "%s at %d first accepted after sequence %d (batch %d)", ev.ID, ev.Sequence, last, i)
			}
			if ev.Entity.Revision <= newest[ev.Entity.ID] {
				problem("entity order", "%s revision %d first accepted after revision %d (batch %d)", ev.Entity.ID, ev.Entity.Revision, newest[ev.Entity.ID], i)
			}
			seen[ev.ID], last = true, max(last, ev.Sequence)
			newest[ev.Entity.ID] = max(newest[ev.Entity.ID], ev.Entity.Revision)
		}
	}
	done := r.addDead(dead, seen, covered, problem)
	r.gaps(covered, problem)
	missingFrom(&r.FeedReport, published, done, newest, problem)
	return r
}

// addDead counts the dead letters by reason, marks their sequences
// covered, and returns the ids accepted or dead-lettered. A letter of
// payload_too_large must keep its sequence (the runner sent it).
func (r *BatchReport) addDead(dead []event.DeadLetter, accepted map[string]bool, covered map[int64]bool, problem func(kind, format string, args ...any)) map[string]bool {
	done := maps.Clone(accepted)
	counted := map[string]bool{}
	for _, l := range dead {
		if l.Delivery == nil {
			problem("dead", "letter %s without its delivery", l.ID)
			continue
		}
		d := l.Delivery
		if d.Sequence > 0 {
			covered[d.Sequence] = true
		} else if l.Reason == event.ReasonTooLarge {
			problem("dead", "%s dead of %s without its sequence", d.EventID, l.Reason)
		}
		if !counted[d.EventID] {
			counted[d.EventID] = true
			r.Dead[l.Reason]++
		}
		done[d.EventID] = true
	}
	return done
}

// gaps reports the sequences up to the highest one covered that were
// neither accepted nor dead-lettered.
func (r *BatchReport) gaps(covered map[int64]bool, problem func(kind, format string, args ...any)) {
	for s := range covered {
		r.Sequence = max(r.Sequence, s)
	}
	for s := int64(1); s <= r.Sequence; s++ {
		if !covered[s] {
			problem("gap", "sequence %d neither accepted nor dead-lettered", s)
		}
	}
}

// problemList returns a func adding a problem to list, at most
// maxProblems of each kind, the first of each kind after those saying
// more were left out.
func problemList(list *[]string) func(kind, format string, args ...any) {
	kinds := map[string]int{}
	return func(kind, format string, args ...any) {
		switch kinds[kind]++; {
		case kinds[kind] <= maxProblems:
			*list = append(*list, kind+": "+fmt.Sprintf(format, args...))
		case kinds[kind] == maxProblems+1:
			*list = append(*list, kind+": … (more left out)")
		}
	}
}
