//go:build simbug

package sim

import "testing"

// TestSimFindsTheCopyBug checks the simulator itself: built with the copy
// bug back (go test -tags simbug ./partition/sim -run CopyBug -v), some
// seed among the first two thousand must break a guarantee (7 of them do,
// the first at seed 217).
func TestSimFindsTheCopyBug(t *testing.T) {
	const within = 2000
	for seed := uint64(1); seed <= within; seed++ {
		if res := Run(seed, Options{}); !res.OK() {
			t.Logf("found at seed %d of %d: %v", seed, within, res.Violations[0])
			return
		}
	}
	t.Fatalf("the reintroduced copy bug went unseen in %d seeds", within)
}

// TestSimScriptFindsTheCopyBug checks the pause-fail-resume script (#1 of
// issue #13) against the bug it is for: with the copy bug back it must
// fail under every one of its seeds.
func TestSimScriptFindsTheCopyBug(t *testing.T) {
	for _, r := range regressions() {
		if r.name != "pause-fail-resume" {
			continue
		}
		for seed := uint64(1); seed <= regressionSeeds; seed++ {
			if res := runRegression(r, seed); res.OK() {
				t.Errorf("seed %d: the pause-fail-resume script passed with the copy bug back", seed)
			}
		}
		return
	}
	t.Fatal("no pause-fail-resume script")
}
