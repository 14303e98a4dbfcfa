//go:build !race

package deliver_test

const raceDetector = false
