package sim

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
)

// eventTypes are the types events are published with; endpoints subscribe
// to all of them or, after an event_types change, to a subset.
func eventTypes() []string { return []string{"thing.created", "thing.updated", "thing.deleted"} }

// publish writes one event's deliveries (one per subscribed endpoint, as
// the fan-out does) to the deliveries partition, sometimes in an aborted
// transaction, sometimes as a record that is not a valid delivery.
func (s *Sim) publish() {
	ev, again := s.repeatEvent()
	if !again {
		ev.entity = fmt.Sprintf("e%d", s.rng.IntN(s.p.entities))
		ev.coalesce = !s.chance(s.p.factShare)
		ev.revision = s.nextRevision(ev.entity)
		ev.id = fmt.Sprintf("ev%d", len(s.elements))
		types := eventTypes()
		ev.typ = types[s.rng.IntN(len(types))]
	}
	aborted := s.chance(s.p.abortedShare)
	if !aborted && !again {
		s.published = append(s.published, ev)
	}
	for _, id := range s.endpointIDs() {
		// The fan-out's rule (endpoint.Store.Subscribers): active
		// endpoints of the tenant whose event_types name the type.
		if ep, ok := s.endpoints[id]; !ok || !ep.Subscribes("t", ev.typ) {
			continue
		}
		if s.chance(s.p.invalidShare) {
			s.publishInvalid(id)
			continue
		}
		s.publishDelivery(ev.delivery(id, s.now), aborted, false)
	}
}

// publishDelivery appends d as a new element of its stream.
func (s *Sim) publishDelivery(d *event.Delivery, aborted, redriven bool) {
	e := &element{index: len(s.elements), event: d.EventID, endpoint: d.EndpointID, entity: d.Entity,
		revision: d.Revision, coalesce: d.Coalesce, redriven: redriven, created: d.CreatedAt}
	d.Data, _ = json.Marshal(payload{I: e.index})
	e.offset = s.kafka.appendDelivery(deliveryRecord("deliveries", d), aborted)
	if aborted {
		s.tracef("publish %s to %s aborted at offset %d", d.EventID, d.EndpointID, e.offset)
		return // never accepted: not an element
	}
	s.elements = append(s.elements, e)
	s.byOffset[e.offset] = e
	key := streamKey{e.endpoint, e.entity}
	e.pos = len(s.streams[key])
	s.streams[key] = append(s.streams[key], e)
	kind := "state"
	if !d.Coalesce {
		kind = "fact"
	}
	s.tracef("publish element %d: %s %s/%s rev %d (%s, %s) at offset %d redriven=%v", e.index, d.EventID, e.endpoint,
		e.entity, e.revision, kind, d.Type, e.offset, redriven)
}

func (s *Sim) publishInvalid(id string) {
	e := &element{index: len(s.elements), endpoint: id, invalid: true}
	e.offset = s.kafka.appendDelivery(&kgo.Record{Topic: "deliveries", Key: []byte(id), Value: []byte(`{"event_id":`)}, false)
	s.elements = append(s.elements, e)
	s.byOffset[e.offset] = e
	s.tracef("publish element %d: invalid record to %s at offset %d", e.index, id, e.offset)
}

// fault injects one random fault.
func (s *Sim) fault() {
	if s.healed {
		return
	}
	ids := s.endpointIDs()
	id := ids[s.rng.IntN(len(ids))]
	switch s.rng.IntN(18) {
	case 0, 1:
		s.setMode(id, receiverMode(1+s.rng.IntN(len(modeNames)-1)))
	case 2:
		s.setMode(id, modeHealthy)
	case 3:
		s.editEndpoint(id, "paused", func(ep *endpoint.Endpoint) { ep.Paused = true })
		if s.chance(0.7) { // else paused until everything heals, past max_age maybe
			s.after(s.rand(20*time.Second), func() { s.editEndpoint(id, "resumed", func(ep *endpoint.Endpoint) { ep.Paused = false }) })
		}
	case 4:
		n := 1 + s.rng.IntN(6)
		s.editEndpoint(id, fmt.Sprintf("max_concurrency %d", n), func(ep *endpoint.Endpoint) { ep.MaxConcurrency = n })
	case 5:
		s.undeliverable = true
		s.editEndpoint(id, "disabled by an operator", func(ep *endpoint.Endpoint) {
			ep.Status, ep.DisabledReason = endpoint.StatusDisabled, "operator"
		})
	case 6:
		s.reenableAndRedrive(id)
	case 7:
		if s.chance(0.3) {
			s.undeliverable = true
			delete(s.endpoints, id)
			s.configChanged(id)
			s.tracef("endpoint %s deleted", id)
		}
	case 8:
		s.kafkaOutage(s.latency([2]time.Duration{500 * time.Millisecond, 10 * time.Second}))
	case 9:
		clear(s.redis)
		s.tracef("redis flushed")
	case 10:
		s.crash()
	case 11:
		s.rebalance()
	case 12:
		s.lose()
	case 13:
		s.redrive(id)
	case 14:
		s.changeEventTypes(id)
	case 15, 16:
		s.pauseWhileFailing(id)
	case 17:
		s.memoryPressure()
	}
}

// changeEventTypes subscribes the endpoint to a random subset of the
// event types (empty: all of them): later events of the other types get no
// delivery for it, and the ones already fanned out are still delivered.
func (s *Sim) changeEventTypes(id string) {
	var types []string
	for _, t := range eventTypes() {
		if s.chance(0.5) {
			types = append(types, t)
		}
	}
	s.editEndpoint(id, fmt.Sprintf("event_types %v", types), func(ep *endpoint.Endpoint) { ep.EventTypes = types })
}

// memoryPressure parks the largest lane, as the stage does when the
// instance's lanes pass their byte budget.
func (s *Sim) memoryPressure() {
	in := s.current
	if in == nil || !in.active() || in.frozen {
		return
	}
	if _, id, _ := in.owner.LaneBytes(); id != "" && in.owner.ParkLane(id, "instance_bytes") {
		s.tracef("memory pressure: lane %s parked", id)
	}
}

// pauseWhileFailing follows the operator runbook that lost deliveries
// before the owner's rewrite: the receiver fails slowly, the endpoint is
// paused while attempts are in flight, they fail and wait for their retry,
// the receiver is fixed, the endpoint resumed.
func (s *Sim) pauseWhileFailing(id string) {
	s.setMode(id, modeHoldFail)
	s.after(s.rand(2*time.Second), func() {
		s.editEndpoint(id, "paused while failing", func(ep *endpoint.Endpoint) { ep.Paused = true })
		s.after(s.latency([2]time.Duration{2 * time.Second, 15 * time.Second}), func() {
			s.setMode(id, modeHealthy)
			s.editEndpoint(id, "resumed", func(ep *endpoint.Endpoint) { ep.Paused = false })
		})
	})
}

func (s *Sim) endpointIDs() []string {
	var ids []string
	for i := range s.p.endpoints {
		ids = append(ids, fmt.Sprintf("ep%d", i))
	}
	return ids
}

func (s *Sim) setMode(id string, m receiverMode) {
	s.modes[id] = m
	s.tracef("receiver %s now %s", id, m)
}

// editEndpoint changes an existing endpoint's config (the store's compacted
// topic, read by every instance).
func (s *Sim) editEndpoint(id, what string, fn func(*endpoint.Endpoint)) {
	ep, ok := s.endpoints[id]
	if !ok {
		return
	}
	fn(&ep)
	s.endpoints[id] = ep
	s.pausedEver = s.pausedEver || ep.Paused
	s.configChanged(id)
	s.tracef("endpoint %s: %s", id, what)
}

// reenableAndRedrive fixes a disabled endpoint, then redrives its dead
// letters, as the runbook says.
func (s *Sim) reenableAndRedrive(id string) {
	s.editEndpoint(id, "re-enabled", func(ep *endpoint.Endpoint) { ep.Status, ep.DisabledReason = endpoint.StatusActive, "" })
	s.setMode(id, modeHealthy)
	s.after(s.rand(5*time.Second), func() { s.redrive(id) })
}

// redrive publishes the endpoint's dead letters again, in dead-topic order,
// as new deliveries (what deadletter.Redriver does), once each.
func (s *Sim) redrive(id string) {
	if _, ok := s.endpoints[id]; !ok || s.kafka.down {
		return
	}
	n := 0
	for _, dl := range s.kafka.dead {
		if dl.EndpointID != id || dl.Delivery == nil {
			continue
		}
		i, ok := elementOf(dl.Delivery)
		if !ok || s.redriven[i] {
			continue
		}
		s.redriven[i] = true
		d := *dl.Delivery
		d.Attempts, d.NotBefore, d.LastError, d.CreatedAt = 0, time.Time{}, "", s.now
		s.publishDelivery(&d, false, true)
		n++
	}
	s.tracef("redrive of %s: %d dead letters published again", id, n)
}

func (s *Sim) kafkaOutage(d time.Duration) {
	if s.kafka.down {
		return
	}
	s.kafka.down = true
	s.tracef("kafka down for %v", d)
	s.after(d, func() {
		s.kafka.down = false
		s.tracef("kafka up")
	})
}

// crash kills the owner's process; it restarts and owns the partition
// again after a while.
func (s *Sim) crash() {
	in := s.current
	if in == nil || !in.active() {
		return
	}
	in.crash()
	s.current = nil
	s.after(s.latency([2]time.Duration{100 * time.Millisecond, 5 * time.Second}), s.startOwner)
}

// rebalance moves the partition to a new owner by a revoke: the new owner
// starts once the old one released it and committed (a loss is lose, in
// loss.go).
func (s *Sim) rebalance() {
	in := s.current
	// A silent member cannot take part in a rebalance: the group waits for
	// it, then drops it (lose).
	if in == nil || !in.active() || s.releasing || in.silent {
		return
	}
	s.current = nil
	s.releasing = true
	in.startRelease(true, func() {
		s.releasing = false
		s.startOwner()
	})
}

// startOwner makes a new instance the owner, unless one owns it or the
// previous owner is still releasing it (the group waits for its revoke).
func (s *Sim) startOwner() {
	if s.current != nil || s.releasing {
		return
	}
	in := s.newInstance()
	s.current = in
	in.assign()
}

// heal ends the faults: Kafka is up, receivers answer 2xx, paused
// endpoints resume. Deleted endpoints stay deleted and disabled ones
// disabled (their deliveries end as dead letters).
func (s *Sim) heal() {
	s.healed = true
	s.kafka.down = false
	for _, id := range s.endpointIDs() {
		s.modes[id] = modeHealthy
		if ep, ok := s.endpoints[id]; ok && ep.Paused {
			ep.Paused = false
			s.endpoints[id] = ep
			s.configChanged(id)
		}
	}
	s.tracef("healed")
	if s.current == nil {
		s.after(time.Millisecond, s.startOwner)
	}
	s.after(s.p.commitEvery, s.checkDrained)
}

// checkDrained ends the run once every element is finished and the owner
// holds nothing; liveness is violated if that takes longer than drainWithin.
func (s *Sim) checkDrained() {
	// Not while the owner is stalled: a frozen owner has not yet counted
	// what retention took from it meanwhile (rule 1), and will.
	if s.allSettled() && s.current != nil && !s.current.silent && s.current.owner.Drained() {
		s.tracef("drained")
		s.done = true
		return
	}
	s.after(s.p.commitEvery, s.checkDrained)
}

// sweepRetention deletes parked records older than the retention, from the
// start of the log, as Kafka's retention does.
func (s *Sim) sweepRetention() {
	k := s.kafka
	for k.parkedLogStart < int64(len(k.parked)) {
		lr := k.parked[k.parkedLogStart]
		if s.now.Sub(lr.at) < s.p.retention {
			break
		}
		k.parkedLogStart++
	}
	if !s.done {
		s.after(time.Second, s.sweepRetention)
	}
}
