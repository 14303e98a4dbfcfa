// Package breaker pauses an endpoint that keeps failing and lets it back in
// with a few probes, so a dead endpoint costs almost nothing while it is dead
// and comes back as soon as it answers.
//
// The state machine is pure: Allow and Record take a Breaker and the current
// time and return the next Breaker, with no I/O and no clock of their own, so
// every transition can be tested exactly. The rules are those of the delivery
// contract:
//
//   - Threshold consecutive failures open the breaker for FirstPause.
//   - When the pause is over the breaker is probing: at most max_concurrency
//     attempts (the probes) are in flight at once.
//   - One success closes the breaker, from any state.
//   - A failed probe round re-opens it with the pause doubled, up to MaxPause.
//
// FailingSince, the time of the first failure of the current streak, lets the
// engine disable an endpoint that has failed for days.
//
// Store keeps breakers in Redis so that the next owner of an endpoint (after a
// rebalance) starts from the state the previous one left, and so that the API
// can show it. Redis holds no truth: a flushed, expired or unreachable key
// reads as the zero Breaker, which is closed, and that only resets the
// breaker (probes start early).
//
// Cache keeps the breakers of the endpoints this instance owns in memory and
// writes the changed ones behind, so the delivery hot path never waits for
// Redis. Kafka gives each endpoint exactly one owner at a time (the owner of
// its partition of laneway.deliveries), so while this instance owns an
// endpoint its in-memory copy is authoritative and Redis is only read on
// handover and by the API. A handover read (Warm) that fails leaves the
// endpoint closed in memory rather than unknown, so a Redis that is down or
// hung costs each endpoint one wait per ownership, not one per lane.
package breaker
