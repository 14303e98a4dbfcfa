package partition

// What the owner holds in memory: its footprint, for the simulator's
// bounds, and the bytes its lanes hold, for the instance's budget.

// Footprint counts what the owner holds in memory, for the simulator's
// check that every structure stays within its configured bound.
type Footprint struct {
	Lanes, Tasks, Entities int
	ParkedLanes            int
	Loaded                 int // parked tasks read back and in a lane
	Unfinished             int // parked offsets read back, not finished
	Copies                 int
	QueuedAppends          int
	QueuedDeadLetters      int
	AlreadyParked          int
	Tracked                int // deliveries offsets tracked, finished or not
	// Bytes: the largest lane's, the largest parked window's, and the
	// queued appends'.
	MaxLaneBytes, MaxWindowBytes, QueuedAppendBytes int64
	Holding                                         bool // the replay hold: lanes do not park
}

// Footprint returns what the owner holds now.
func (o *Owner) Footprint() Footprint {
	f := Footprint{Lanes: len(o.lanes), ParkedLanes: len(o.parked), QueuedAppends: o.appends.pending(),
		QueuedDeadLetters: o.dead.pending(), AlreadyParked: len(o.alreadyParked),
		QueuedAppendBytes: o.appends.bytes, Holding: o.holding}
	for _, ls := range o.lanes {
		f.Tasks += ls.lane.Pending() + ls.lane.InFlight()
		f.Entities += ls.lane.Entities()
		f.MaxLaneBytes = max(f.MaxLaneBytes, ls.lane.Bytes())
	}
	for _, pl := range o.parked {
		f.Loaded += pl.inLane
		f.Unfinished += len(pl.unfinished)
		f.Copies += len(pl.copies)
		f.MaxWindowBytes = max(f.MaxWindowBytes, pl.windowBytes())
	}
	if o.tracker != nil {
		f.Tracked = o.tracker.size
	}
	return f
}

// LaneBytes returns the bytes every lane holds, and the lane holding the
// most (most bytes) that is not parked yet and has work to park ("" if
// none), for the driver's instance-wide budget. Ties go to the lowest id,
// so the choice does not depend on map order.
func (o *Owner) LaneBytes() (total int64, largest string, most int64) {
	for id, ls := range o.lanes {
		b := ls.lane.Bytes()
		total += b
		if o.parked[id] != nil || ls.lane.Pending() == 0 {
			continue
		}
		if b > most || (b == most && b > 0 && id < largest) {
			most, largest = b, id
		}
	}
	return total, largest, most
}

// ParkLane parks an endpoint's lane that is not parked yet, for a reason
// the driver gives (the instance's memory budget), and reports whether it
// did. The replay hold keeps lanes whole: nothing parks while it lasts.
func (o *Owner) ParkLane(id, why string) bool {
	ls := o.lanes[id]
	if ls == nil || o.parked[id] != nil || o.holding || o.stopped || !o.discovered || ls.lane.Pending() == 0 || !o.cfg.Lease.Held(o.now()) {
		return false
	}
	o.park(ls, why)
	o.flushOutboxes(o.now())
	return true
}

// Drained reports whether the owner holds no work at all: no lane, no
// parked backlog, nothing to produce and every tracked offset finished.
func (o *Owner) Drained() bool {
	return len(o.lanes) == 0 && len(o.parked) == 0 && o.appends.pending() == 0 && o.dead.pending() == 0 &&
		(o.tracker == nil || o.tracker.Outstanding() == 0) && o.Idle()
}
