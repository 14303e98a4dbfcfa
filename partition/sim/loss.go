package sim

import (
	"slices"
	"time"
)

// A lost partition, and rule 2 across owners.
//
// A member loses its partition when the group could not hear from it for
// its session timeout: the group gives the partition to another member
// without a revoke. The case modelled is the documented one, a member
// paused past its session timeout (docs/reliability.md, "What it does not
// cover"): from the loss it fetches, retries and commits nothing more, but
// what it holds goes on. Attempts in flight run to their end and their
// completions may start the lane's next deliveries, until it learns of the
// loss (its next heartbeat fails); then the stage's onLost releases it
// without the commit and cancels its attempts at once (engine/rebalance.go:
// the next owner may be delivering already). Its commits would be refused
// by the group (the parked progress travels in the fenced deliveries
// commit; engine's TestZombieCommitIsRefused).

// learnWithin is how long after the loss the old member learns of it:
// franz-go's heartbeat interval (3 s by default).
const learnWithin = 3 * time.Second

// lose takes the partition from its owner without a revoke: the new owner
// starts after a random delay up to the revoke timeout, whatever the old
// one still runs; the old one learns of the loss after a random delay up
// to learnWithin and releases it then.
func (s *Sim) lose() {
	in := s.current
	if in == nil || !in.active() || s.releasing {
		return
	}
	s.current = nil
	in.lost, in.owning = true, false // no fetch, tick or commit any more
	learns := s.rand(learnWithin)
	s.tracef("gen %d lost the partition (learns of it in %v)", in.gen, learns)
	s.after(s.rand(s.p.revokeTimeout), s.startOwner)
	s.after(learns, func() {
		if in.alive {
			in.releaseLost()
		}
	})
}

// attemptStarted checks rule 2 as an attempt starts: no other attempt of
// its (endpoint, entity) is in flight. The one allowance is the documented
// window of a lost partition (docs/reliability.md, "What it does not
// cover"): an attempt of a member that lost the partition, started before
// it learned of the loss, may overlap an attempt of the next owner. It
// lasts at most from the loss until the old member learned of it
// (learnWithin), when its attempts are canceled: such overlaps are traced
// and counted (Result.LossOverlaps), not violations; a longer one is.
func (s *Sim) attemptStarted(run *attemptRun) {
	r := s.receiver
	others := r.inFlight[run.key]
	r.inFlight[run.key] = append(others, run)
	for _, o := range others {
		if lossWindow(o, run) {
			s.tracef("rule 2 allowance: element %d (gen %d) and element %d (gen %d) of %s/%s in flight at once, one owner lost",
				o.elem, o.in.gen, run.elem, run.in.gen, run.key.endpoint, run.key.entity)
			continue
		}
		s.violate("rule 2: %d attempts of %s/%s in flight at once (element %d, gen %d)", len(others)+1,
			run.key.endpoint, run.key.entity, run.elem, run.in.gen)
	}
}

// attemptEnded takes an attempt out of flight and measures the overlaps
// the loss window allowed.
func (s *Sim) attemptEnded(run *attemptRun) {
	r := s.receiver
	r.inFlight[run.key] = slices.DeleteFunc(r.inFlight[run.key], func(x *attemptRun) bool { return x == run })
	for _, o := range r.inFlight[run.key] {
		if lossWindow(o, run) {
			from := run.started
			if o.started.After(from) {
				from = o.started
			}
			s.lossOverlaps++
			s.longestOverlap = max(s.longestOverlap, s.now.Sub(from))
			if most := learnWithin; s.now.Sub(from) > most {
				s.violate("rule 2: attempts of %s/%s of a lost owner and the next overlapped %v, beyond the loss window %v",
					run.key.endpoint, run.key.entity, s.now.Sub(from), most)
			}
		}
	}
}

// lossWindow reports whether two attempts in flight at once are the
// allowance of rule 2: of two owners, one of which lost the partition.
func lossWindow(a, b *attemptRun) bool {
	return a.in != b.in && (a.in.lost || b.in.lost)
}

// releaseLost is the stage's onLost: Stop, cancel every attempt at once,
// no commit.
func (in *instance) releaseLost() {
	in.owning = false
	in.owner.Stop()
	in.s.tracef("gen %d learned of the loss: attempts canceled, nothing committed", in.gen)
	in.cancelAttempts()
	in.s.tracef("gen %d released", in.gen)
}
