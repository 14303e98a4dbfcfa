//go:build race

package sim

// raceSeeds is the default number of seeds under the race detector, which
// slows the simulator about tenfold: the suite's race run checks the
// simulator's own concurrency on a sample, and `make test` runs the full
// count without it.
const raceSeeds = 500
