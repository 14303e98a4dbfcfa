package sim

import "github.com/laneway/laneway/partition"

// Rule 5: every structure the owner's Footprint exposes stays within a
// bound set by configuration (windows, buffers, poll size, the replay
// hold), never by the backlog, the number of distinct entities or the time
// parked. Checked after every dispatch, completion and commit.

// holdAllowance is what the replay hold may add to the lanes and the
// queued appends: ReplayHoldRecords while the owner holds; after the hold
// ended, what was left of it, which drains and never grows back.
type holdAllowance struct {
	tasks, appends int
	appendBytes    int64
	tracked        int64 // offsets fetched while the hold lifted the tracker's limit
}

// full is the allowance while the owner holds a replay.
func (s *Sim) fullHold() holdAllowance {
	return holdAllowance{tasks: s.p.replayHoldRecords, appends: s.p.replayHoldRecords,
		appendBytes: int64(s.p.replayHoldRecords) * s.kafka.maxValue}
}

// update keeps the full allowance while the owner holds, and otherwise
// shrinks it to what the owner holds now.
func (h *holdAllowance) update(s *Sim, f partition.Footprint) {
	if f.Holding {
		*h = s.fullHold()
		h.tracked = int64(f.Tracked + s.p.maxPollRecords) // the poll that ends the hold lands without the limit too
		return
	}
	h.tracked = min(h.tracked, int64(f.Tracked))
	h.tasks = min(h.tasks, f.Tasks)
	h.appends = min(h.appends, f.QueuedAppends)
	h.appendBytes = min(h.appendBytes, f.QueuedAppendBytes)
}

type bound struct {
	what      string
	got, most int64
}

// checkMemory checks rule 5 for the instance's owner.
func (s *Sim) checkMemory(in *instance) {
	f := in.owner.Footprint()
	in.hold.update(s, f)
	counts, bytes := s.countBounds(in, f), s.byteBounds(in, f)
	for _, b := range counts {
		s.within(b)
	}
	for _, b := range bytes {
		s.within(b)
	}
	s.within(s.trackedBound(in, f))
}

func (s *Sim) within(b bound) {
	s.peak(b)
	if b.got > b.most {
		s.violate("rule 5: %s: %d, above the bound %d", b.what, b.got, b.most)
	}
}

// trackedBound is MaxTrackedOffsets, beyond which the owner stops
// fetching, plus the one poll that may pass it before the driver acts. The
// limit does not apply while the replay hold lasts (see
// partition.Config.MaxTrackedOffsets): what the hold fetched beyond it is
// allowed until the watermark has moved past it.
func (s *Sim) trackedBound(in *instance, f partition.Footprint) bound {
	most := max(int64(s.p.maxTracked+s.p.maxPollRecords), in.hold.tracked)
	if f.Holding {
		// The replay hold bounds what it fetches: the replay range, then
		// one poll.
		most = max(most, in.replayRange+int64(s.p.maxPollRecords))
	}
	return bound{"tracked offsets", int64(f.Tracked), most}
}

// countBounds are the bounds in records.
func (s *Sim) countBounds(in *instance, f partition.Footprint) [10]bound {
	p, h := s.p, in.hold
	lanes := int64(p.endpoints)
	copiesPerLane := int64(8)
	switch {
	case s.undeliverable:
		copiesPerLane = partition.DeadLetterConcurrency + 8
	case s.pausedEver:
		// A paused lane dead-letters every expired entity head at once
		// (expirePaused), each in flight until its dead letter lands: up to
		// what the lane holds (seed 124058: 23 when it parked).
		copiesPerLane = int64(p.laneBuffer + p.maxPollRecords + 8)
	}
	inLanes := lanes * int64(p.laneBuffer+p.maxPollRecords+p.parkedWindow+8)
	return [...]bound{
		{"lanes", int64(f.Lanes), lanes},
		{"parked lanes", int64(f.ParkedLanes), lanes},
		{"tasks in lanes", int64(f.Tasks), inLanes + int64(h.tasks)},
		// Each entity a lane keeps has a task in it: entities come and go
		// with their tasks, however many distinct ones pass through.
		{"entities in lanes", int64(f.Entities), int64(f.Tasks)},
		{"parked tasks read back", int64(f.Loaded), lanes * int64(p.parkedWindow)},
		{"parked offsets unfinished", int64(f.Unfinished), lanes * int64(2*p.parkedWindow+8)},
		// One per task in flight when its lane parked: max_concurrency,
		// or the dead-letter limit of an undeliverable endpoint's lane.
		{"parked copies", int64(f.Copies), lanes * copiesPerLane},
		// A lane that parks again appends what it read back too: up to
		// its parked window (production-size windows, 64–256, pass the
		// slack of 8: seed 42123 of 20,001–60,000).
		{"queued appends", int64(f.QueuedAppends), int64(p.maxQueuedAppends+p.maxPollRecords) +
			lanes*int64(p.laneBuffer+p.maxPollRecords+p.parkedWindow+8) + int64(h.appends)},
		// Lanes and windows dying at once, and what the dispatch dead-letters
		// (an undeliverable endpoint's) up to the backpressure, and one poll.
		{"queued dead letters", int64(f.QueuedDeadLetters), inLanes + lanes*int64(p.parkedWindow) +
			int64(p.maxQueuedAppends+p.maxPollRecords+h.tasks)},
		// Filled by the assignment scan only, one per delivery of the
		// replay range found parked, and emptied as the replay meets them.
		{"offsets found parked at assignment", int64(f.AlreadyParked), in.replayRange},
	}
}

// byteBounds are the bounds in bytes: each is its budget plus the records
// that may pass it before the owner acts (a fetch, a lane's attempts, the
// lookahead), at the largest record size seen.
func (s *Sim) byteBounds(in *instance, f partition.Footprint) [3]bound {
	p, size := s.p, s.kafka.maxValue
	slack := int64(p.maxPollRecords+p.parkedWindow/4+8+6) * size // 6: the largest max_concurrency
	lane := max(p.laneBytes, 2*p.parkedWindowBytes) + slack
	if f.Holding {
		lane += int64(p.replayHoldRecords) * size // the hold keeps lanes whole
	}
	return [...]bound{
		{"bytes in one lane", f.MaxLaneBytes, lane},
		// Staged records join the window's count when promoted: up to the
		// lookahead beyond the record that passed it.
		{"bytes in one parked window", f.MaxWindowBytes, 2*p.parkedWindowBytes + int64(1+max(1, p.parkedWindow/4))*size},
		{"bytes of queued appends", f.QueuedAppendBytes, p.maxQueuedAppendBytes + int64(p.endpoints)*lane +
			int64(p.maxPollRecords)*size + in.hold.appendBytes},
	}
}

// peak keeps the highest share of its bound each structure reached, and
// its raw value, for the -peaks report.
func (s *Sim) peak(b bound) {
	if s.peaks == nil {
		return
	}
	pk := s.peaks[b.what]
	if b.most > 0 {
		pk.share = max(pk.share, float64(b.got)/float64(b.most))
	}
	pk.most = max(pk.most, b.got)
	s.peaks[b.what] = pk
}

// Peak is one structure's highest value in a run, and its highest share
// of its bound.
type Peak struct {
	share float64
	most  int64
}
