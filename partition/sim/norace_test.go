//go:build !race

package sim

// raceSeeds is unused without the race detector; see race_test.go.
const raceSeeds = 0
