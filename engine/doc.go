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
//	fanout.go      the fan-out stage: events → deliveries, in Kafka transactions
//	delivery.go    the delivery stage: config, lifecycle, the poll, tick and commit loops
//	driven.go      one owned partition: the owner under its mutex, effects carried out after it
//	rebalance.go   taking partitions over (the commits an owner starts from) and giving them up
//	commit.go      the deliveries watermark with the parked progress, in one fenced commit
//	collector.go   per-endpoint and per-partition gauges, read at scrape time
//	metrics.go     the stage's counters and histograms
//	events.go      what the stage did, told to DeliveryConfig.OnEvent (tests wait on it)
//	fdlimit_*.go   the default cap on attempts in flight, from the file-descriptor limit
package engine
