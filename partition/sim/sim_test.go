package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	seedFlag      = flag.Uint64("seed", 0, "replay this one seed (with -v: its whole trace)")
	seedsFlag     = flag.Int("seeds", 0, "number of seeds to run (default 10000, 300 under -short)")
	firstFlag     = flag.Uint64("first", 1, "first seed of the range")
	maxFailedFlag = flag.Int("max-failed", 5, "report at most this many failed seeds")
)

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
	failed := runSeeds(*firstFlag, n, runtime.GOMAXPROCS(0))
	for _, res := range failed {
		report(t, res)
	}
	t.Logf("%d seeds from %d: %d failed", n, *firstFlag, len(failed))
}

// runSeeds runs n seeds from first on workers goroutines and returns the
// failed runs (at most 5, the lowest seeds first found).
func runSeeds(first uint64, n, workers int) []Result {
	var (
		next   atomic.Uint64
		mu     sync.Mutex
		failed []Result
		wg     sync.WaitGroup
	)
	next.Store(first)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seed := next.Add(1) - 1
				if seed >= first+uint64(n) {
					return
				}
				res := Run(seed, Options{})
				if res.OK() {
					continue
				}
				mu.Lock()
				if len(failed) < *maxFailedFlag {
					failed = append(failed, res)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed
}

func report(t *testing.T, res Result) {
	t.Helper()
	if res.OK() {
		t.Logf("seed %d: ok (%d elements, %d delivered, %d dead, %v simulated)", res.Seed, res.Elements, res.Delivered, res.Dead, res.EndedAt)
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
	msg += fmt.Sprintf("replay: go test ./partition/sim -run Sim -seed %d -v\nlast lines of the trace:\n", res.Seed)
	for _, l := range tail {
		msg += "  " + l + "\n"
	}
	t.Error(msg)
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}
