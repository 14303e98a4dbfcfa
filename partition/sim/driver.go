package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/partition"
)

// instance is one Laneway process owning the partition: the simulated
// delivery stage driving a partition.Owner, as engine.DeliveryStage does.
type instance struct {
	s     *Sim
	gen   int
	owner *partition.Owner
	brk   *breakers
	slots *partition.SlotPool // the instance's cap on attempts in flight; nil: none

	alive    bool // the process runs (false after a crash)
	owning   bool // assigned and not stopped
	lost     bool // the group gave the partition to another member: commits are fenced
	fetchPos int64
	// maintainedAt is the owner's last Maintain under its lease: the config
	// it applied then is at most as old as this (rule 11).
	maintainedAt time.Time
	attempts     []*attemptRun // in flight, in start order
	appends      produceQueue
	deads        produceQueue
	// released is closed over by the release in progress; nil otherwise.
	release *releaseState
	// hold is what the replay hold may add to memory (rule 5), and
	// replayRange the deliveries offsets above the commit at assignment.
	hold        holdAllowance
	replayRange int64

	// The group membership and the fence (loss.go).
	lease    *partition.Lease
	rate     float64   // the clock's rate against the coordinator's
	heardAt  time.Time // when the coordinator last heard a heartbeat
	silent   bool      // no heartbeat reaches the coordinator (frozen or cut off)
	frozen   bool      // the process is stopped: its events wait for it
	deferred []func()  // what happened to a frozen process, in order
}

type attemptRun struct {
	a       *partition.Attempt
	key     streamKey
	elem    int
	in      *instance
	started time.Time
	ended   bool
}

func (s *Sim) newInstance() *instance {
	s.gen++
	in := &instance{s: s, gen: s.gen, alive: true}
	in.brk = newBreakers(s.p.breaker, s.redis)
	var slots partition.Slots
	if s.p.maxInFlight > 0 {
		in.slots = partition.NewSlotPool(s.p.maxInFlight, s.Now)
		slots = in.slots
	}
	owner, err := partition.NewOwner(partition.Config{
		Slots:     slots,
		Partition: 0, ParkedTopic: "parked", DeadTopic: "dead",
		Endpoints: s.configView(), Effects: in, Clock: s, Breakers: in.brk, Rand: s.rng.Float64,
		Retry: s.p.retry, DisableAfter: s.p.disableAfter, ParkAfter: s.p.parkAfter, LaneBuffer: s.p.laneBuffer,
		ParkedWindow: s.p.parkedWindow, MaxAppendsInFlight: s.p.maxAppendsInFlight, MaxQueuedAppends: s.p.maxQueuedAppends, MaxTrackedOffsets: s.p.maxTracked,
		ReplayHoldRecords: s.p.replayHoldRecords, MaxProgressBytes: s.p.maxProgressBytes,
		LaneBytes: s.p.laneBytes, ParkedWindowBytes: s.p.parkedWindowBytes, MaxQueuedAppendBytes: s.p.maxQueuedAppendBytes, ReplayHold: time.Minute, // above the simulated outages
		Metrics: &s.metrics, Logger: s.logger, Lease: in.newLease(),
	})
	if err != nil {
		panic(err)
	}
	in.owner = owner
	in.joinGroup()
	return in
}

// assign makes the instance the partition's owner from the commits.
func (in *instance) assign() {
	in.owning = true
	in.fetchPos = in.s.kafka.deliveriesCommit
	k := in.s.kafka
	in.s.tracef("gen %d assigned: deliveries from %d, parked progress %s", in.gen, in.fetchPos, k.parkedProgress.Encode(partition.DefaultMaxProgressBytes))
	a := partition.Assignment{Parked: k.parkedProgress, DeliveriesCommitted: k.deliveriesCommit, ReplayEnd: k.lastRecordEnd(),
		Generation: int64(in.gen)}
	in.replayRange = max(0, a.ReplayEnd-a.DeliveriesCommitted)
	if in.replayRange > 0 {
		in.hold = in.s.fullHold()
	}
	in.maintainedAt = in.s.now
	in.s.touchAtAssignment()
	in.owner.Assign(a)
	in.after(in.s.p.pollEvery, in.poll)
	in.after(in.s.p.tickEvery, in.tick)
	in.after(in.s.p.commitEvery, in.maintain)
}

func (in *instance) active() bool { return in.alive && in.owning }

// poll fetches what the deliveries partition has beyond fetchPos, unless
// the owner asks for backpressure or Kafka is down.
func (in *instance) poll() {
	if !in.active() {
		return
	}
	defer in.after(in.s.p.pollEvery, in.poll)
	k := in.s.kafka
	if k.down || in.owner.Backpressured() || in.fetchPos >= int64(len(k.deliveries)) {
		return
	}
	n := 1 + in.s.rng.IntN(in.s.p.maxPollRecords)
	var batch []partition.Incoming
	for ; in.fetchPos < int64(len(k.deliveries)) && len(batch) < n; in.fetchPos++ {
		lr := k.deliveries[in.fetchPos]
		if lr.aborted {
			continue
		}
		rec := *lr.rec
		d, err := event.ParseDelivery(rec.Value)
		inc := partition.Incoming{Record: &rec, Err: err}
		if err == nil {
			inc.Delivery = &d
		}
		batch = append(batch, inc)
	}
	if len(batch) == 0 {
		return
	}
	high, last := int64(len(k.deliveries)), in.fetchPos-1
	if in.s.p.fetchDelay == 0 {
		in.dispatch(batch, high, last)
		return
	}
	in.after(in.s.p.fetchDelay, func() {
		if in.active() {
			in.dispatch(batch, high, last)
		}
	})
}

// dispatch hands a batch to the owner; rule 14 checks that a member whose
// lease lapsed routes none of it.
func (in *instance) dispatch(batch []partition.Incoming, high, last int64) {
	in.s.tracef("gen %d dispatch %d records up to offset %d", in.gen, len(batch), last)
	defer in.s.checkMemory(in)
	if in.lease.Held(in.s.now) {
		in.owner.Dispatch(batch, high)
		return
	}
	before := in.owner.Footprint()
	in.owner.Dispatch(batch, high)
	in.s.checkFenced(in.gen, before, in.owner.Footprint())
}

func (in *instance) tick() {
	if !in.active() {
		return
	}
	in.owner.Tick()
	in.after(in.s.p.tickEvery, in.tick)
}

// maintain applies config changes and commits, like the stage's commit
// loop.
func (in *instance) maintain() {
	if !in.active() {
		return
	}
	if in.lease.Held(in.s.now) {
		in.maintainedAt = in.s.now
	}
	in.owner.Maintain()
	in.commit()
	in.s.checkMemory(in)
	in.after(in.s.p.commitEvery, in.maintain)
}

// commit commits the owner's deliveries watermark with its parked
// progress, in one commit; it fails while Kafka is down and now and then
// at random.
func (in *instance) commit() {
	c, moved := in.owner.PendingCommit()
	var err error
	if !moved {
		return
	}
	if in.lost {
		in.s.tracef("gen %d commit refused: the partition was lost (fenced)", in.gen)
		return
	}
	if in.s.kafka.down || in.s.chance(in.s.p.commitFailure) {
		in.s.tracef("gen %d commit failed (deliveries %d, parked %s)", in.gen, c.Deliveries, c.Metadata)
		return
	}
	// What a new owner finds is the metadata, not the owner's own value.
	if c.Parked, err = partition.DecodeProgress(c.Metadata); err != nil {
		panic(fmt.Sprintf("sim: the owner committed parked progress it cannot read: %v", err))
	}
	in.s.checkCommit(c)
	in.s.kafka.deliveriesCommit, in.s.kafka.parkedProgress = c.Deliveries, c.Parked
	in.s.tracef("gen %d committed deliveries %d, parked %s", in.gen, c.Deliveries, c.Metadata)
	if in.commitAckLost() {
		return
	}
	in.owner.Committed(c)
}

// Send starts an HTTP attempt at the simulated receiver.
func (in *instance) Send(a *partition.Attempt) {
	s := in.s
	d := a.Delivery
	key := streamKey{d.EndpointID, d.Entity}
	elem, _ := elementOf(d)
	run := &attemptRun{a: a, key: key, elem: elem, in: in, started: s.now}
	s.attemptStarted(run)
	in.attempts = append(in.attempts, run)
	in.policyCheck(run)
	if in.slots != nil && len(in.attempts) > s.p.maxInFlight {
		s.violate("rule 5: %d attempts in flight, above the instance's cap %d", len(in.attempts), s.p.maxInFlight)
	}
	res, latency := s.answer(d.EndpointID)
	if s.pull[d.EndpointID] {
		res, latency = s.appendAnswer(d.EndpointID)
	}
	s.tracef("gen %d send element %d (%s/%s rev %d, attempt %d) → %s in %v", in.gen, elem, key.endpoint, key.entity,
		d.Revision, d.Attempts+1, describe(res), latency)
	s.after(latency, func() { in.attemptEnded(run, res) })
}

// policyCheck hands an attempt starting now to rules 8–13 (policy.go). A
// member that lost the partition may redo what the next owner does: what
// it sends is touched by that fault.
func (in *instance) policyCheck(run *attemptRun) {
	s, id := in.s, run.key.endpoint
	if in.lost {
		s.policy.touched[run.elem] = true
	}
	n := 0
	for _, r := range in.attempts {
		if r.key.endpoint == id {
			n++
		}
	}
	a := attemptSeen{gen: in.gen, elem: run.elem, endpoint: id, http: !s.pull[id],
		recordCount: run.a.Delivery.Attempts, inFlight: n, limit: s.limitAllowed(id, in.maintainedAt.Add(-s.p.configLag)), breaker: in.brk.Get(id),
		loaded: in.brk.fromStore[id]}
	a.config, a.exists = s.configView().Get(id) // what the owner can know of it

	s.attemptStarting(a)
}

// attemptEnded is the receiver's answer: the attempt ends at the receiver
// now, and the owner hears of it now too, or when it wakes if its process
// is frozen.
func (in *instance) attemptEnded(run *attemptRun, res deliver.Result) {
	if run.ended {
		return // the process died, or the attempt was canceled
	}
	a := run.a
	in.endAttempt(run)
	if res.Err == nil {
		in.s.delivered(run.elem, a.Delivery)
	}
	in.run(func() {
		if !in.alive {
			return
		}
		in.s.attemptHeard(in.gen, run.elem, a.Delivery.Attempts+1, res)
		in.owner.AttemptDone(a, partition.AttemptResult{Result: res})
		in.afterEffect()
	})
}

// endAttempt ends an attempt at the receiver: it is no longer in flight.
func (in *instance) endAttempt(run *attemptRun) {
	run.ended = true
	in.attempts = slices.DeleteFunc(in.attempts, func(r *attemptRun) bool { return r == run })
	in.s.attemptEnded(run)
}

// cancelAttempts ends every attempt still running as canceled (the stage
// cancels them at the revoke deadline).
func (in *instance) cancelAttempts() {
	for _, run := range slices.Clone(in.attempts) {
		a := run.a
		in.endAttempt(run)
		in.s.tracef("gen %d cancel element %d at the revoke deadline", in.gen, run.elem)
		cause := errors.New("revoke deadline")
		in.owner.AttemptDone(a, partition.AttemptResult{Result: deliver.Result{Err: &deliver.CanceledError{Cause: cause}}})
	}
}

// Append produces a parked record.
func (in *instance) Append(a *partition.Append) {
	in.produce(&in.appends, func(ok bool) {
		if !ok {
			in.owner.Appended(a, -1, errProduce)
			return
		}
		in.owner.Appended(a, in.s.kafka.appendParked(a.Record), nil)
	}, func() { in.s.kafka.appendParked(a.Record) })
}

// WriteDead produces a dead letter.
func (in *instance) WriteDead(w *partition.DeadWrite) {
	in.produce(&in.deads, func(ok bool) {
		if !ok {
			in.owner.DeadWritten(w, errProduce)
			return
		}
		in.s.deadLetter(w.Letter)
		in.owner.DeadWritten(w, nil)
	}, func() { in.s.deadLetter(w.Letter) })
}

var errProduce = errors.New("sim: produce failed")

// Read reads the parked partition. A member that lost the partition but
// has not learned of it yet reads on (loss.go): its lease keeps what it
// reads from starting.
func (in *instance) Read(r *partition.Read) {
	s := in.s
	in.after(s.latency(s.p.readLatency), func() {
		if !in.alive {
			return
		}
		res, err := s.readParked(r.From)
		in.owner.ReadDone(r, res, err)
		in.afterEffect()
	})
}

// Disable writes the endpoint's status.
func (in *instance) Disable(id, reason string) {
	s := in.s
	in.after(s.latency(s.p.produceLatency), func() {
		if !in.alive {
			return
		}
		var err error
		if s.kafka.down || s.chance(s.p.produceFailure) {
			err = errProduce
		} else if ep, ok := s.endpoints[id]; ok {
			s.undeliverable = true
			ep.Status, ep.DisabledReason = "disabled", reason
			s.endpoints[id] = ep
			s.configChanged(id)
			s.tracef("endpoint %s disabled by gen %d: %s", id, in.gen, reason)
		}
		in.owner.DisableDone(id, err)
		in.afterEffect()
	})
}

// WarmBreaker loads a breaker from "Redis".
func (in *instance) WarmBreaker(id string) {
	in.after(in.s.latency(in.s.p.readLatency), func() {
		if !in.alive {
			return
		}
		in.brk.warm(id)
		in.owner.BreakerWarmed(id)
		in.afterEffect()
	})
}

// LoadHealth loads nothing: health snapshots are not simulated.
func (in *instance) LoadHealth(string) {}

// afterEffect runs after every completion: a released owner may now be
// idle.
func (in *instance) afterEffect() {
	if rs := in.release; rs != nil && in.owner.Idle() {
		in.release = nil
		rs.finish()
	}
	in.s.checkMemory(in)
}

// crash kills the process: memory is gone, attempts end (their connections
// reset), produces in flight land or not.
func (in *instance) crash() {
	in.alive, in.owning = false, false
	in.frozen, in.deferred = false, nil
	for _, run := range slices.Clone(in.attempts) {
		in.endAttempt(run)
	}
	in.appends.crash(in.s)
	in.deads.crash(in.s)
	in.s.tracef("gen %d crashed", in.gen)
}

// releaseState is a revoke or loss in progress.
type releaseState struct {
	in       *instance
	commit   bool
	finished bool
	then     func()
}

// startRelease stops the owner and waits for it to be idle, up to the
// revoke deadline, where attempts still out are canceled; then it commits
// (on a revoke), hands the breakers over and calls then.
func (in *instance) startRelease(commit bool, then func()) {
	in.owning = false
	in.owner.Stop()
	rs := &releaseState{in: in, commit: commit, then: then}
	in.s.tracef("gen %d releasing (commit %v)", in.gen, commit)
	if in.owner.Idle() {
		rs.finish()
		return
	}
	in.release = rs
	in.after(in.s.p.revokeTimeout, func() {
		if rs.finished {
			return
		}
		in.cancelAttempts()
		in.release = nil
		rs.finish()
	})
}

func (rs *releaseState) finish() {
	if rs.finished {
		return
	}
	rs.finished = true
	in := rs.in
	if rs.commit && in.alive {
		in.commit()
		in.brk.flush()
	}
	in.s.tracef("gen %d released", in.gen)
	rs.then()
}

func describe(res deliver.Result) string {
	if res.Err == nil {
		return "200"
	}
	var se *deliver.StatusError
	if errors.As(res.Err, &se) {
		return fmt.Sprint(se.Code)
	}
	return res.Err.Error()
}

// readParked answers a read of the parked partition from offset.
func (s *Sim) readParked(from int64) (partition.ReadResult, error) {
	k := s.kafka
	end := int64(len(k.parked))
	res := partition.ReadResult{End: end, LogStart: k.parkedLogStart, Next: from}
	if k.down || s.chance(s.p.readFailure) {
		return res, errors.New("sim: parked read failed")
	}
	if from < k.parkedLogStart || from > end {
		res.OutOfRange = true
		return res, nil
	}
	n := 1 + s.rng.IntN(s.p.readRecords)
	for o := from; o < end && len(res.Records) < n; o++ {
		rec := *k.parked[o].rec
		res.Records = append(res.Records, &rec)
		res.Next = o + 1
	}
	return res, nil
}

var _ partition.Effects = (*instance)(nil)
var _ = kgo.Record{}
