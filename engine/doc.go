// Package engine runs Laneway's two stages: the fan-out stage, which turns
// each event into one delivery per subscribed endpoint, and the delivery
// stage, which gives every endpoint its own lane (per-entity order, a
// concurrency limit, retries) and commits each partition's watermark.
//
// The delivery stage is a driver: every decision about a partition is made
// by a partition.Owner, a deterministic core that this package feeds with
// fetched records and completions and whose effects it carries out.
//
// Where things live:
//
//	fanout.go          the fan-out stage: events → deliveries, in Kafka transactions
//	deliveryconfig.go  the delivery stage's Config, its defaults and the interfaces it is given
//	delivery.go        the delivery stage: lifecycle, the poll, tick and commit loops
//	workers.go         the reused goroutines attempts run on
//	driven.go          one owned partition: the owner under its mutex, effects carried out after it
//	rebalance.go       taking partitions over (the commits an owner starts from) and giving them up
//	commit.go          the deliveries watermark with the parked progress, in one fenced commit
//	collector.go       per-endpoint and per-partition gauges, read at scrape time
//	metrics.go         the stage's counters and histograms
//	events.go          what the stages did, told to DeliveryConfig.OnEvent and FanoutConfig.OnEvent
//	fdlimit_*.go       the default cap on attempts in flight, from the file-descriptor limit
//	util.go            DefaultInstanceID (the hostname)
//
// And its tests:
//
//	stage_rig_test.go  the delivery stage's rig: kfake or the real broker, fakes, a recording receiver
//	stage_*_test.go    the delivery stage, one concern a file: backpressure, breakers, bytes, disable,
//	                   expiry (a paused backlog past max_age), feed, fencing (a zombie's commit, a
//	                   lost partition), parked progress, slots, stop, takeover (a late append
//	                   of an earlier owner is skipped), thin payloads
//	workers_test.go    the attempt goroutines: reused, and drained on stop
//	events_test.go     the stages' events (the log tests wait on)
//	hanging_test.go    the fan-out repairing hanging transactions, on the real broker
//	hotpath_test.go    the per-delivery work without Kafka or a network: allocations and a benchmark
//
// The packages around it, and where each lives in the repository, are in
// docs/architecture.md.
package engine
