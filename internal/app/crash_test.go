package app_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestCrashWhileParkedBacklogDrains kill -9s a real laneway process while a
// parked backlog drains, restarts it, and checks that every event arrives
// and that no entity's revisions are first delivered out of order.
func TestCrashWhileParkedBacklogDrains(t *testing.T) {
	run := newProcessRun(t, "crash", "--park-after", "500ms", "--commit-interval", "200ms", "--retry-base", "1s")
	b, bin, f, args, addr := run.b, run.bin, run.fleet, run.args, run.addr
	proc := startProcess(t, bin, args, addr)
	api := apiClient{t: t, base: "http://" + addr}

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

// checkFirstDeliveryOrder allows replays (duplicates) but no first delivery
// of a revision after the first delivery of a higher one.
func checkFirstDeliveryOrder(t *testing.T, receipts []fleet.Receipt) {
	t.Helper()
	seen := map[string]bool{}
	highest := map[string]int64{}
	for _, r := range receipts {
		if seen[r.MsgID] {
			continue
		}
		seen[r.MsgID] = true
		if r.Revision < highest[r.Entity] {
			t.Errorf("entity %s: revision %d first delivered after %d", r.Entity, r.Revision, highest[r.Entity])
		}
		highest[r.Entity] = max(highest[r.Entity], r.Revision)
	}
}

// processRun is what a test of a real laneway process starts from: the
// binary, a receiver fleet and serve's arguments against the real broker.
type processRun struct {
	b         testenv.Backend
	bin, addr string
	args      []string
	fleet     *fleet.Fleet
	events    string // the run's events topic
}

// newProcessRun skips unless the real broker is there; extra flags follow
// the common ones (topics and groups of their own, loopback targets, a 6 s
// session timeout).
func newProcessRun(t *testing.T, name string, extra ...string) processRun {
	t.Helper()
	if testing.Short() {
		t.Skip("process test")
	}
	b, ok := testenv.RealKafka()
	if !ok {
		t.Skipf("needs the real broker: %s not set", testenv.KafkaEnv)
	}
	run := processRun{b: b, bin: buildLaneway(t), addr: freeAddr(t)}
	f, err := fleet.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	run.fleet = f
	ns := testenv.Unique(name)
	run.events = ns + ".events"
	run.args = append([]string{"serve", "--kafka-brokers", strings.Join(b.Brokers, ","), "--redis-url", b.RedisURL,
		"--http-addr", run.addr, "--topic-prefix", ns, "--group-prefix", ns, "--instance-id", ns, "--partitions", "4",
		"--allow-targets", "127.0.0.0/8", "--session-timeout", "6s", "--secrets-key-file", testenv.SecretsKeyFile(t),
		"--log-level", cmp.Or(os.Getenv("LANEWAY_TEST_LOG"), "warn"), "--log-format", "text"}, extra...)
	return run
}

func buildLaneway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "laneway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/laneway")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProcess runs laneway and waits until /readyz answers 200.
func startProcess(t *testing.T, bin string, args []string, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(time.Minute)
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("laneway did not become ready: %v", err)
		}
		<-poll.C
	}
}

func publishTo(t *testing.T, brokers []string, topic string, values [][]byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, v := range values {
		var env event.Envelope
		if err := json.Unmarshal(v, &env); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Key: []byte(env.Entity), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("publish: %v", err)
	}
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
