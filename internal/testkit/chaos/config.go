// Package chaos is Laneway's fault harness. It runs Laneway as real
// processes (the laneway binary) against a real Kafka broker and a real
// Redis of its own (scripts/testenv.sh in a private state directory), under a
// steady publishing load to a fleet of verifying receivers, injects one kind
// of fault per scenario, drains, and hands the logs to the independent order
// checker (package ordercheck):
//
//	kill9    kill -9 one instance mid-load, ten times (restarted at once, as a supervisor would)
//	rolling  three instances restarted one after the other (SIGTERM, start, wait for the group)
//	broker   the Kafka broker stopped and restarted (SIGTERM, then once more with SIGKILL)
//	redis    Redis FLUSHALL, and separately a Redis restart (SIGKILL, empty on return)
//	flap     one receiver flapping between healthy and failing (500, 503, hangs, resets)
//	kill-while-parked-drains  kill -9 of an endpoint's owner while its parked backlog drains
//
// and, opt-in (run only when named, until the engine passes them):
//
//	pause-fail-resume       an endpoint paused while its attempts are in flight and failing
//	rebalance-long-attempt  rebalances while 20 s attempts are in flight
//
// Every scenario must end with 0 lost, 0 order violations and no two
// requests of one (endpoint, entity) in flight at once; duplicates and the
// time to recover from each fault are measured and reported.
package chaos

import (
	"time"
)

// Config sets the scale of the scenarios and the Laneway settings they run
// with. CIConfig and LargeConfig are the two presets.
type Config struct {
	Root    string // repository root (scripts/testenv.sh, ./cmd/laneway)
	Bin     string // laneway binary; built into WorkDir when empty
	WorkDir string // each scenario writes its logs and report to WorkDir/<scenario>

	Rate     float64 // events/s published, steadily, for the whole load phase
	Entities int     // entities the events are spread over (two tenants)
	Seed     uint64  // of the event mix

	Warmup time.Duration // steady load before the first fault
	Tail   time.Duration // steady load after the last fault

	Instances  int // laneway processes (rolling uses at least 3)
	Partitions int // of the events, deliveries and parked topics

	Kills     int           // kill9: how many kill -9s
	KillEvery time.Duration // kill9: time between two kills

	RollGap time.Duration // rolling: pause after an instance is back before the next one

	BrokerDown time.Duration // broker: how long the broker stays down
	Gap        time.Duration // broker, redis: time between the scenario's two faults
	RedisDown  time.Duration // redis: how long Redis stays down on restart

	FlapCycles  int           // flap: failing/healthy cycles
	FlapFailing time.Duration // flap: a failing period
	FlapHealthy time.Duration // flap: a healthy period

	Freezes     int           // freeze: how many times an instance is frozen
	FreezeFor   time.Duration // freeze: how long it stays frozen (past the session timeout)
	FreezeEvery time.Duration // freeze: time between two freezes

	SessionTimeout time.Duration // laneway --session-timeout
	DrainTimeout   time.Duration // after publishing stops, how long every delivery may take
	StallTimeout   time.Duration // the drain also ends when nothing outstanding was handled for this long
	LateAfter      time.Duration // a first delivery slower than this (from its ack) is late: see Recovery
	LogLevel       string        // laneway --log-level
	LanewayArgs    []string      // extra `laneway serve` flags for every instance, e.g. --kafka-transaction-v2

	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// CIConfig is the small scale run in CI: every scenario, a few minutes in all
// on a 2-core machine.
func CIConfig() Config {
	return Config{
		Rate: 150, Entities: 200, Seed: 1,
		Warmup: 3 * time.Second, Tail: 6 * time.Second,
		Instances: 2, Partitions: 6,
		// A kill stalls the group for about a session timeout (6 s) and a
		// rebalance: 8 s apart, each recovery is measured on its own.
		Kills: 10, KillEvery: 8 * time.Second,
		RollGap:    time.Second,
		BrokerDown: 3 * time.Second, Gap: 7 * time.Second, RedisDown: 3 * time.Second,
		FlapCycles: 4, FlapFailing: 3 * time.Second, FlapHealthy: 3 * time.Second,
		// Twice the session timeout: the group has given the frozen
		// instance's partitions away, and the next owner is delivering, when
		// it wakes.
		Freezes: 4, FreezeFor: 12 * time.Second, FreezeEvery: 8 * time.Second,
		// The broker scenario's backlog drains at the pace per-entity order
		// allows (about 90 deliveries/s here): under the suite's load its
		// two outages reach 130 s, and the drain 2 min. A drain that stops
		// moving still ends after StallTimeout.
		SessionTimeout: 6 * time.Second, DrainTimeout: 4 * time.Minute, StallTimeout: 30 * time.Second,
		LateAfter: time.Second, LogLevel: "info",
	}
}

// LargeConfig is the on-demand scale: about seven times the rate, five times the
// entities, longer between faults so that each recovery is measured whole.
func LargeConfig() Config {
	c := CIConfig()
	c.Rate, c.Entities = 1000, 1000
	c.Warmup, c.Tail = 10*time.Second, 20*time.Second
	c.Instances, c.Partitions = 3, 12
	c.KillEvery = 15 * time.Second
	c.RollGap = 5 * time.Second
	c.BrokerDown, c.Gap, c.RedisDown = 15*time.Second, 30*time.Second, 10*time.Second
	c.FlapCycles, c.FlapFailing, c.FlapHealthy = 8, 8*time.Second, 8*time.Second
	c.DrainTimeout, c.StallTimeout = 10*time.Minute, 2*time.Minute
	return c
}

func (c *Config) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}
