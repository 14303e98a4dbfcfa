package sim

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	seedFlag      = flag.Uint64("seed", 0, "replay this one seed (with -v: its whole trace)")
	seedsFlag     = flag.Int("seeds", 0, "number of seeds to run (default 10000, 300 under -short)")
	firstFlag     = flag.Uint64("first", 1, "first seed of the range")
	maxFailedFlag = flag.Int("max-failed", 5, "stop after this many failed seeds (1: at the first, as make mutants does)")
	peaksFlag     = flag.Bool("peaks", false, "log each memory structure's highest share of its bound (rule 5) over the seeds")
)

func init() {
	flag.BoolVar(&backwardRevisions, "backward-revisions", false,
		"a producer whose revisions go back in a quarter of the seeds (off: an open rule 3 finding, inputs.go)")
}

// TestSim runs the simulator over a range of seeds and fails with the
// first seeds whose runs broke a guarantee, each with the command that
// replays it.
func TestSim(t *testing.T) {
	if *seedFlag != 0 {
		res := Run(*seedFlag, Options{Trace: testing.Verbose()})
		if testing.Verbose() {
			t.Log("\n" + res.TraceText())
		}
		report(t, res)
		return
	}
	n := *seedsFlag
	switch {
	case n > 0:
	case testing.Short():
		n = 300
	case raceSeeds > 0:
		n = raceSeeds
	default:
		n = 10000
	}
	failed, sum := runSeeds(*firstFlag, n, runtime.GOMAXPROCS(0))
	for _, res := range failed {
		report(t, res)
	}
	t.Logf("stalls: %d members stalled past their lease (%d frozen, the rest cut off from the coordinator), %d of them lost the partition",
		sum.stalls, sum.frozen, sum.losses)
	for _, what := range slices.Sorted(maps.Keys(sum.peaks)) {
		pk := sum.peaks[what]
		t.Logf("rule 5 peak: %-36s %5.2f of its bound (seed %d), at most %d", what, pk.share, pk.seed, pk.most)
	}
	t.Logf("%d seeds from %d: %d failed", n, *firstFlag, len(failed))
}

// seedPeak is a structure's highest share of its bound over many seeds.
type seedPeak struct {
	share float64
	seed  uint64
	most  int64
}

// summary is what many seeds showed besides their failures.
type summary struct {
	peaks                  map[string]seedPeak // with -peaks
	stalls, frozen, losses int
}

func (sum *summary) add(res Result) {
	for what, pk := range res.Peaks {
		sp := sum.peaks[what]
		if pk.share > sp.share {
			sp.share, sp.seed = pk.share, res.Seed
		}
		sp.most = max(sp.most, pk.most)
		sum.peaks[what] = sp
	}
	sum.stalls += res.Stalls
	sum.frozen += res.Frozen
	sum.losses += res.Losses
}

// runSeeds runs n seeds from first on workers goroutines and returns the
// failed runs and their summary. It hands out no more seeds once
// -max-failed runs failed, so a planted bug that is caught (make mutants)
// costs seconds, not the whole range; the summary then covers the seeds
// run.
func runSeeds(first uint64, n, workers int) ([]Result, summary) {
	var (
		next   atomic.Uint64
		mu     sync.Mutex
		failed []Result
		sum    = summary{peaks: map[string]seedPeak{}}
		wg     sync.WaitGroup
	)
	next.Store(first)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seed := next.Add(1) - 1
				if seed >= first+uint64(n) || enough(&mu, &failed) {
					return
				}
				res := Run(seed, Options{Peaks: *peaksFlag})
				mu.Lock()
				sum.add(res)
				if !res.OK() && len(failed) < *maxFailedFlag {
					failed = append(failed, res)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed, sum
}

// enough reports whether -max-failed runs failed already.
func enough(mu *sync.Mutex, failed *[]Result) bool {
	mu.Lock()
	defer mu.Unlock()
	return len(*failed) >= *maxFailedFlag
}

func report(t *testing.T, res Result) {
	t.Helper()
	if res.OK() {
		t.Logf("seed %d: ok (%d elements, %d delivered, %d dead, %v simulated; %d stalls, %d frozen, %d losses)",
			res.Seed, res.Elements, res.Delivered, res.Dead, res.EndedAt, res.Stalls, res.Frozen, res.Losses)
		return
	}
	tail := res.Trace
	if len(tail) > 60 {
		tail = tail[len(tail)-60:]
	}
	msg := fmt.Sprintf("seed %d broke a guarantee:\n", res.Seed)
	for _, v := range res.Violations {
		msg += "  " + v + "\n"
	}
	msg += fmt.Sprintf("replay: go test ./partition/sim -run 'TestSim$' -seed %d -v\nlast lines of the trace:\n", res.Seed)
	for _, l := range tail {
		msg += "  " + l + "\n"
	}
	t.Error(msg)
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}
