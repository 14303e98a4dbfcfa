//go:build race

package deliver_test

// raceDetector: the race detector allocates on its own, so allocation
// counts are not checked under it.
const raceDetector = true
