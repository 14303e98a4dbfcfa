package app_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestGracefulShutdown sends SIGTERM to a real laneway process while four
// slow deliveries are in flight: it stops fetching, lets them finish,
// commits and exits 0 within a bounded time. After a restart the rest are
// delivered and none of the four is delivered again (the commit on
// shutdown covered them).
func TestGracefulShutdown(t *testing.T) {
	run := newProcessRun(t, "shutdown", "--commit-interval", "10s")
	b, bin, f, args, addr := run.b, run.bin, run.fleet, run.args, run.addr
	proc := startProcess(t, bin, args, addr)
	api := newAPI(t, addr)

	var inFlight atomic.Int64
	started := make(chan struct{}, 100)
	ep := api.createEndpoint(map[string]any{"tenant": "acme", "url": f.URL(1), "max_concurrency": 4})
	recv, _ := f.Add(1, ep.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) {
		inFlight.Add(1)
		started <- struct{}{}
		time.Sleep(1500 * time.Millisecond) // a slow receiver: the attempts are in flight at SIGTERM
		inFlight.Add(-1)
		w.WriteHeader(http.StatusOK)
	})
	const events = 12
	var values [][]byte
	for i := range events {
		values = append(values, envelope(fmt.Sprintf("s-%d", i), "acme", fmt.Sprintf("order:%d", i), 1))
	}
	publishTo(t, b.Brokers, run.events, values)
	for range 4 {
		select {
		case <-started:
		case <-time.After(time.Minute):
			t.Fatal("the first four deliveries never started")
		}
	}

	// The commit interval is 10 s, so only the shutdown's own commit can
	// cover the four in-flight deliveries.
	stopAt := time.Now()
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(); err != nil {
		t.Fatalf("laneway exited with %v after SIGTERM", err)
	}
	took := time.Since(stopAt)
	if got := distinctIDs(recv.Receipts()); got != 4 {
		t.Fatalf("%d deliveries completed by shutdown, want the 4 in flight", got)
	}
	if took > 20*time.Second { // the bound: in-flight attempts (≤ 5 s each) plus commit and leave
		t.Fatalf("shutdown took %v", took)
	}
	t.Logf("shutdown with 4 attempts in flight took %v", took.Round(time.Millisecond))

	startProcess(t, bin, args, addr)
	waitUntil(t, f, 2*time.Minute, "every event after the restart", func() bool { return distinctIDs(recv.Receipts()) >= events })
	if n := len(recv.Receipts()); n != events {
		t.Fatalf("%d deliveries of %d events: the in-flight ones were delivered again, so shutdown did not commit them", n, events)
	}
}
