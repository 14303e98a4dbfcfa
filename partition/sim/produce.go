package sim

import (
	"slices"
	"time"
)

// The simulated producer: an owner's produces to one partition,
// acknowledged in order after a random latency, failing in order, landing
// or not when the process dies, and retried by the producer after their
// owner stopped.

// produceQueue is one partition's produces in flight, acknowledged in the
// order they were issued, as Kafka does.
type produceQueue struct {
	lastAck  time.Time
	inFlight []*produce
}

type produce struct {
	doomed bool // an earlier produce failed: this one fails too
	done   bool
	land   func() // writes the record without acknowledging it
	ack    func(ok bool)
	tries  int // the schedule in force; an answer of an earlier one is void
}

// crash decides which produces in flight reached the broker anyway: a
// prefix of them, as an idempotent producer's sequence numbers allow.
func (q *produceQueue) crash(s *Sim) {
	landing := !s.kafka.down
	for _, p := range q.inFlight {
		landing = landing && !p.doomed && s.chance(0.5)
		if landing {
			p.land()
		}
		p.done = true
	}
	q.inFlight = nil
}

// produce acknowledges in order, after a random latency; a failure fails
// every produce issued before it and still in flight. land writes the
// record when the process dies with the produce in flight and the broker
// had it anyway.
func (in *instance) produce(q *produceQueue, ack func(ok bool), land func()) {
	p := &produce{land: land, ack: ack}
	q.inFlight = append(q.inFlight, p)
	in.schedule(q, p, in.s.latency(in.s.p.produceLatency))
}

// schedule has p answered after d, and strictly after every produce of q
// scheduled before it: acknowledgements come in order.
func (in *instance) schedule(q *produceQueue, p *produce, d time.Duration) {
	s := in.s
	at := s.now.Add(d)
	if !at.After(q.lastAck) {
		at = q.lastAck.Add(time.Nanosecond)
	}
	q.lastAck = at
	p.tries++
	try := p.tries
	in.at(at, func() {
		if p.done || p.tries != try {
			return
		}
		if !in.alive {
			p.done = true
			return
		}
		ok := !p.doomed && !s.kafka.down && !s.chance(s.p.produceFailure)
		if !ok && !p.doomed && in.owner.Stopped() {
			in.producerRetries(q, p)
			return
		}
		p.done = true
		q.inFlight = slices.DeleteFunc(q.inFlight, func(x *produce) bool { return x == p })
		if ok && in.owner.Stopped() {
			s.tracef("gen %d (stopped): a produce landed", in.gen)
		}
		if !ok {
			for _, later := range q.inFlight {
				later.doomed = true
			}
		}
		p.ack(ok)
		in.afterEffect()
	})
}

// producerRetries is the producer going on with what a stopped owner (its
// partition released or lost) left in flight: the owner gives nothing up
// that it handed over, and the producer retries each record, in order,
// until it lands, when the broker is back. Such a zombie write may land
// long after the next owner began: the parked log then holds an old
// owner's record after the new owner's.
func (in *instance) producerRetries(q *produceQueue, failed *produce) {
	i := slices.Index(q.inFlight, failed)
	q.lastAck = in.s.now
	for n, p := range q.inFlight[i:] {
		p.doomed = false
		backoff := time.Duration(0)
		if n == 0 {
			backoff = in.s.latency(in.s.p.producerRetry)
		}
		in.schedule(q, p, backoff)
	}
	in.s.tracef("gen %d (stopped): %d produces retried by the producer", in.gen, len(q.inFlight)-i)
}
