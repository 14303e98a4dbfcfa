package sim

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/laneway/laneway/partition"
)

// Group membership, the lease, and the stalls that cost a member its
// partition.
//
// A member heartbeats to the group coordinator (the stage's fence
// heartbeats, engine/fence.go); an answer without an error renews its
// lease (partition.Lease), measured from the heartbeat's sending, and the
// owner starts an attempt only if it ends within the lease. The
// coordinator drops a member it has not heard from for the session
// timeout and gives its partition to the next member; the dropped member
// learns of it from the answer to its next heartbeat.
//
// A stall is what makes a member go silent: its process frozen (a GC
// pause, a stopped VM or container: every event of the process waits until
// it wakes, completions and overdue timers included, while its requests
// already out land and the receiver answers on time), or cut off from the
// coordinator while it still fetches, reads, appends and commits as usual.
// A stall shorter than what is left of the session costs nothing but the
// lease; a longer one costs the partition, and the member wakes, or
// reconnects, believing it still owns it. Its commits are refused from
// the loss (the group checks the member and generation). Clocks run at
// rates within the drift bound of the coordinator's.
//
// Rule 2 has no allowance for any of it: two attempts of one (endpoint,
// entity) in flight at once at the receiver, whoever made them, is a
// violation, and so is rule 3's first delivery after a later one.

// drawGroup draws the group's timing from the seed, not from the run's
// random stream: a session timeout at the narrowest the lease allows, a
// short one as tests use, or production's default; the stage's fence
// heartbeat pace, or in a share of the seeds franz-go's own (a fifth of
// the session).
func (p *params) drawGroup(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5e551011))
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.IntN(hi-lo+1)) * time.Millisecond }
	switch r.IntN(4) {
	case 0:
		p.sessionTimeout = partition.MinSessionTimeout(p.attemptTimeout) + ms(300, 2000)
	case 1:
		p.sessionTimeout = ms(6000, 20000)
	default:
		p.sessionTimeout = 45 * time.Second
	}
	p.heartbeatEvery = fenceHeartbeatEvery(p.sessionTimeout)
	if r.IntN(4) == 0 {
		p.heartbeatEvery = p.sessionTimeout / 5
	}
	p.heartbeatLatency = [2]time.Duration{time.Millisecond, ms(5, 300)}
	p.drift = partition.DefaultLeaseDrift
}

// fenceHeartbeatEvery is the stage's pace (engine.DeliveryConfig's
// FenceInterval default): a tenth of the session, at most a second.
func fenceHeartbeatEvery(session time.Duration) time.Duration {
	return min(time.Second, session/10)
}

func (in *instance) newLease() *partition.Lease {
	l, err := partition.NewLease(partition.LeaseConfig{
		SessionTimeout: in.s.p.sessionTimeout, AttemptTimeout: in.s.p.attemptTimeout, Drift: in.s.p.drift,
	})
	if err != nil {
		panic(err)
	}
	in.lease = l
	return l
}

// joinGroup makes the instance a member: the join is a heartbeat the
// coordinator heard now, and it heartbeats from here on. Its clock's rate
// is drawn within the drift bound.
func (in *instance) joinGroup() {
	s := in.s
	in.rate = 1 - s.p.drift + 2*s.p.drift*s.group.Float64()
	in.heardAt = s.now
	in.renew(s.now)
	in.afterBeat(s.p.heartbeatEvery, in.heartbeat)
}

// afterBeat is after for the heartbeats: drawn from the group's stream.
func (in *instance) afterBeat(d time.Duration, fn func()) {
	in.s.atGroup(in.s.now.Add(d), func() { in.run(fn) })
}

// heartbeat sends one heartbeat unless nothing reaches the coordinator;
// the coordinator hears it halfway, and the answer comes back to the
// process (waiting for it if it is frozen).
func (in *instance) heartbeat() {
	s := in.s
	if !in.alive || !in.owning {
		return
	}
	in.afterBeat(s.p.heartbeatEvery, in.heartbeat)
	if in.silent || s.kafka.down {
		return
	}
	sentAt := s.now
	r := s.p.heartbeatLatency
	lat := r[0] + time.Duration(s.group.Int64N(int64(r[1]-r[0])))
	s.atGroup(s.now.Add(lat/2), func() {
		member := !in.lost
		if member {
			in.heardAt = s.now
		}
		in.afterBeat(lat-lat/2, func() { in.answered(sentAt, member) })
	})
}

// answered acts on a heartbeat's answer: a member renews its lease; a
// member the group dropped learns of it and releases the partition as the
// stage's onLost does.
func (in *instance) answered(sentAt time.Time, member bool) {
	if !in.alive || !in.owning {
		return
	}
	if !member {
		in.s.tracef("gen %d learned of the loss from a heartbeat's answer", in.gen)
		in.releaseLost()
		return
	}
	in.renew(sentAt)
}

// renew renews the lease from a heartbeat sent at sentAt, as a clock at
// in.rate measures it: the lease's length on that clock is length/rate of
// the coordinator's time.
func (in *instance) renew(sentAt time.Time) {
	l := in.lease.Length()
	in.lease.Renew(sentAt.Add(time.Duration(float64(l)/in.rate) - l))
}

// lose stalls the owner: frozen or cut off from the coordinator, for up
// to three session timeouts. The group drops it once it has not heard from
// it for the session timeout, and the next owner starts after a random
// delay up to the revoke timeout.
func (s *Sim) lose() {
	in := s.current
	if in == nil || !in.active() || s.releasing || in.silent {
		return
	}
	in.silent = true
	in.frozen = s.chance(0.5)
	s.stalls++
	if in.frozen {
		s.frozen++
	}
	silentFor := s.rand(3 * s.p.sessionTimeout)
	dropAt := in.heardAt.Add(s.p.sessionTimeout)
	s.tracef("gen %d stalls (frozen %v) for %v; the group drops it at %.3fs unless it hears from it",
		in.gen, in.frozen, silentFor, dropAt.Sub(s.start).Seconds())
	s.at(maxTime(s.now, dropAt), func() { s.drop(in) })
	s.after(silentFor, in.resume)
}

// drop is the coordinator's session timeout: unless it heard from the
// member meanwhile, the partition goes to the next member.
func (s *Sim) drop(in *instance) {
	if s.current != in || !in.alive || in.heardAt.Add(s.p.sessionTimeout).After(s.now) {
		return
	}
	s.current = nil
	in.lost = true // commits are refused from now on
	s.losses++
	s.tracef("gen %d dropped by the group: its lease ended at %.3fs", in.gen, in.lease.Until().Sub(s.start).Seconds())
	s.after(s.rand(s.p.revokeTimeout), s.startOwner)
}

// resume ends a stall: a frozen process runs what waited for it, in order,
// at once (answers that arrived, overdue timers); heartbeats reach the
// coordinator again.
func (in *instance) resume() {
	if !in.alive {
		return
	}
	in.silent = false
	if !in.frozen {
		return
	}
	in.frozen = false
	in.s.tracef("gen %d wakes: %d events waited for it", in.gen, len(in.deferred))
	for len(in.deferred) > 0 && !in.frozen {
		fn := in.deferred[0]
		in.deferred = in.deferred[1:]
		fn()
	}
}

// after schedules fn in the instance's process: a frozen process runs it
// when it wakes.
func (in *instance) after(d time.Duration, fn func()) { in.at(in.s.now.Add(d), fn) }

func (in *instance) at(t time.Time, fn func()) { in.s.at(t, func() { in.run(fn) }) }

func (in *instance) run(fn func()) {
	if in.frozen {
		in.deferred = append(in.deferred, fn)
		return
	}
	fn()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// attemptStarted checks rule 2 as an attempt starts: no other attempt of
// its (endpoint, entity) is in flight at the receiver, whichever owner
// made it.
func (s *Sim) attemptStarted(run *attemptRun) {
	r := s.receiver
	others := r.inFlight[run.key]
	r.inFlight[run.key] = append(others, run)
	if len(others) > 0 {
		s.violate("rule 2: %d attempts of %s/%s in flight at once (element %d, gen %d; element %d, gen %d)", len(others)+1,
			run.key.endpoint, run.key.entity, run.elem, run.in.gen, others[0].elem, others[0].in.gen)
	}
}

// attemptEnded takes an attempt out of flight at the receiver.
func (s *Sim) attemptEnded(run *attemptRun) {
	r := s.receiver
	r.inFlight[run.key] = slices.DeleteFunc(r.inFlight[run.key], func(x *attemptRun) bool { return x == run })
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
