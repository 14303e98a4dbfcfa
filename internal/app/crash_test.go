package app_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestCrashWhileParkedBacklogDrains kill -9s a real laneway process while a
// parked backlog drains, restarts it, and checks that every event arrives
// and that no entity's revisions are first delivered out of order.
func TestCrashWhileParkedBacklogDrains(t *testing.T) {
	run := newProcessRun(t, "crash", "--park-after", "500ms", "--commit-interval", "200ms", "--retry-base", "1s")
	b, bin, f, args, addr := run.b, run.bin, run.fleet, run.args, run.addr
	proc := startProcess(t, bin, args, addr)
	api := newAPI(t, addr)

	// 2 slots at 40 ms: about 50 deliveries/s, so a burst of 600 parks.
	var delivered atomic.Int64
	ep := api.createEndpoint(map[string]any{"tenant": "acme", "url": f.URL(1), "max_concurrency": 2})
	recv, _ := f.Add(1, ep.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) {
		time.Sleep(40 * time.Millisecond)
		delivered.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	const events, entities = 600, 12
	var values [][]byte
	for i := range events {
		values = append(values, envelope(fmt.Sprintf("c-%d", i), "acme", fmt.Sprintf("order:%d", i%entities), int64(i/entities+1)))
	}
	publishTo(t, b.Brokers, run.events, values)

	waitUntil(t, f, time.Minute, "part of the backlog", func() bool { return delivered.Load() >= 100 })
	if !strings.Contains(scrape(t, addr), `laneway_lanes_parked_total{reason="park_after"}`) {
		t.Fatal("the lane was not parked before the kill: the test would not exercise a draining parked backlog")
	}
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	killedAt := len(recv.Receipts())

	restart := time.Now()
	startProcess(t, bin, args, addr)
	t.Logf("restarted in %v", time.Since(restart).Round(time.Millisecond))
	waitUntil(t, f, 3*time.Minute, "every event after the restart", func() bool { return distinctIDs(recv.Receipts()) >= events })
	receipts := recv.Receipts()
	t.Logf("backlog finished %v after the restart", time.Since(restart).Round(time.Millisecond))
	t.Logf("%d events, %d deliveries (%d duplicates), killed after %d", events, len(receipts), len(receipts)-events, killedAt)
	checkFirstDeliveryOrder(t, receipts)
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}
