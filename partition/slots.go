package partition

import (
	"sync"
	"time"
)

// Slots caps the attempts in flight of a whole instance, shared by every
// owner of the instance, so the sum of every endpoint's max_concurrency
// cannot exhaust sockets or file descriptors.
type Slots interface {
	// Acquire takes a slot for an attempt to endpointID, or reports false
	// when none may be taken now; the owner then tries again on a later
	// completion or Tick.
	Acquire(endpointID string) bool
	// Release gives an attempt's slot back.
	Release(endpointID string)
}

// SlotPool is the Slots of an instance: at most Cap attempts in flight.
// While other endpoints wait for a slot, an endpoint holding its fair
// share (Cap divided among the endpoints holding or waiting) takes no
// more; with nobody waiting, an endpoint may use what is free, up to half
// the slots: a slow endpoint that took slots while the instance was quiet
// holds them until its attempts end (up to the attempt timeout), and must
// not starve the endpoints that come after it. A slow endpoint also never
// holds more than its own max_concurrency (its lane's limit); once the
// cap binds, the others share the rest evenly. It is safe for concurrent
// use.
type SlotPool struct {
	mu      sync.Mutex
	cap     int
	used    int
	held    map[string]int
	waiting map[string]time.Time // refused endpoints, until served or forgotten
	// waitingOnly counts the waiting endpoints that hold no slot, so that
	// the fair share costs O(1): owners ask again on every tick, and with
	// many endpoints waiting a scan per ask would be quadratic.
	waitingOnly int
	lastSweep   time.Time
	now         func() time.Time
}

// waitingFor is how long a refused endpoint counts as waiting without
// asking again (an owner asks again on every Tick, every few tens of ms).
const waitingFor = time.Second

// NewSlotPool returns a pool of n slots; now is the clock.
func NewSlotPool(n int, now func() time.Time) *SlotPool {
	return &SlotPool{cap: max(n, 1), held: map[string]int{}, waiting: map[string]time.Time{}, now: now}
}

// Acquire implements Slots.
func (p *SlotPool) Acquire(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.forgetIdleWaiters(now)
	if p.used < p.cap && p.held[id] < p.ceiling() && (p.held[id] < p.fairShare(id) || !p.othersWaiting(id)) {
		p.unsetWaiting(id)
		p.used++
		p.held[id]++
		return true
	}
	p.setWaiting(id, now)
	return false
}

// Release implements Slots.
func (p *SlotPool) Release(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[id] == 0 {
		return // not ours: nothing to give back
	}
	p.used--
	if p.held[id]--; p.held[id] == 0 {
		delete(p.held, id)
		if _, ok := p.waiting[id]; ok {
			p.waitingOnly++
		}
	}
}

// InUse returns the slots taken and the cap.
func (p *SlotPool) InUse() (used, capacity int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used, p.cap
}

func (p *SlotPool) setWaiting(id string, now time.Time) {
	if _, ok := p.waiting[id]; !ok && p.held[id] == 0 {
		p.waitingOnly++
	}
	p.waiting[id] = now
}

func (p *SlotPool) unsetWaiting(id string) {
	if _, ok := p.waiting[id]; ok {
		if p.held[id] == 0 {
			p.waitingOnly--
		}
		delete(p.waiting, id)
	}
}

// ceiling is the most slots one endpoint may hold: half of them.
func (p *SlotPool) ceiling() int { return max(1, p.cap/2) }

// fairShare is the cap divided among the endpoints holding slots or
// waiting for one, id included.
func (p *SlotPool) fairShare(id string) int {
	active := len(p.held) + p.waitingOnly
	if _, waiting := p.waiting[id]; p.held[id] == 0 && !waiting {
		active++
	}
	active = max(active, 1)
	return max(1, (p.cap+active-1)/active) // rounded up, so no slot stays idle
}

func (p *SlotPool) othersWaiting(id string) bool {
	n := len(p.waiting)
	if _, ok := p.waiting[id]; ok {
		n--
	}
	return n > 0
}

// forgetIdleWaiters drops the endpoints that stopped asking, a few times
// per waitingFor rather than on every ask.
func (p *SlotPool) forgetIdleWaiters(now time.Time) {
	if now.Sub(p.lastSweep) < waitingFor/4 {
		return
	}
	p.lastSweep = now
	for w, at := range p.waiting {
		if now.Sub(at) > waitingFor {
			p.unsetWaiting(w)
		}
	}
}
