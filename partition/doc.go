// Package partition keeps the books of each Kafka partition an instance owns:
// which consumed offsets still have work outstanding, and therefore which
// offset is safe to commit (the watermark); ownership across rebalances and
// the parking of lanes that cannot keep up build on that.
//
// The watermark is what makes "at least once" hold: an offset is committed
// only once every record below it was delivered, dead-lettered, superseded
// or parked, so a crash replays work rather than losing it.
//
// The Owner decides everything for one deliveries partition and its parked
// partition. It starts no goroutine, reads no clock and never blocks: every
// effect goes through Effects, every completion comes back as a method, so
// the simulator (package sim) can drive it through any interleaving.
//
// Where things live:
//
//	owner.go      Owner, its Config, lanes, stopping
//	dispatch.go   dispatching fetched records to lanes (or dead letters)
//	lane.go       one endpoint's queue: per-entity FIFO, concurrency limit, turns
//	lanequeue.go  the lane's turn queue and heaps (due, age), each O(1) or O(log n)
//	tracker.go    finished offsets and the watermark
//	attempts.go   starting attempts and acting on their outcomes (retry, dead letter, breaker)
//	maintain.go   Tick and Maintain: retry delays, breaker pauses, config changes, parking
//	parking.go    parking a lane: copies of in-flight deliveries, appends, hand-over
//	readback.go   reading a parked lane back: the window, staging, dying unread
//	replay.go     assignment: the scan of the parked partition, the replay hold
//	epoch.go      takeover records and epochs: an earlier owner's late appends are stale
//	progress.go   the parked progress per endpoint, committed as the commit's metadata
//	outbox.go     produces issued in order and retried in order
//	memory.go     what the owner holds: footprint, byte budgets
//	slots.go      the instance's cap on attempts in flight (SlotPool)
//	stats.go      per-endpoint gauges and health snapshots
//	effects.go    the Effects the driver carries out, and their requests
//	bug_off.go    reintroduceCopyBug, false in every real build
//	bug_on.go     the same, true under the simbug build tag: brings back the bug that started
//	              the simulator, so that go test -tags simbug ./partition/sim shows it is found
//	mutant.go     mutated(name): the planted bugs of the mutant catalogue (partition/sim/mutants.txt)
//	mutant_off.go activeMutant, the empty constant in every real build: each planted branch is removed
//	mutant_on.go  the same under the simmutant build tag, read from LANEWAY_MUTANT (make mutants)
//
// And its tests, beside the files they test: epoch_test.go, lane_test.go,
// outbox_test.go, progress_test.go, slots_test.go, stats_test.go,
// tracker_test.go. The Owner as a whole is tested by the simulator,
// package sim.
package partition
