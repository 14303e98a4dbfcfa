package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// startApp runs a Laneway on backend b with topics and groups of its own.
func startApp(t *testing.T, b testenv.Backend, tweak func(*app.Config)) *app.App {
	t.Helper()
	ns := testenv.Unique("e2e")
	cfg := app.Config{
		KafkaBrokers: b.Brokers, RedisURL: b.RedisURL, HTTPAddr: "127.0.0.1:0",
		Secrets: app.SecretsConfig{Ring: testenv.SecretsRing(t)},
		Topics: topics.Config{
			Events: ns + ".events", Deliveries: ns + ".deliveries", Parked: ns + ".parked",
			Dead: ns + ".dead", Endpoints: ns + ".endpoints", Inbound: ns + ".inbound", Sources: ns + ".sources", FeedPrefix: ns + ".feed.", BatchPrefix: ns + ".batch.",
			Partitions: 4,
		},
		GroupPrefix:    ns,
		InstanceID:     ns,
		AllowTargets:   []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Retry:          deliver.RetryPolicy{Base: 50 * time.Millisecond, Max: time.Second, MaxAttempts: 5, MaxAge: time.Hour},
		CommitInterval: 200 * time.Millisecond,
		// Small enough that the end-to-end burst parks lanes, so ordering
		// and exactly-the-subscribed checks cover the parked path too.
		LaneBuffer: 500,
		Logger:     testLogger(),
	}
	if b.Name == testenv.Embedded.Name {
		cfg.EmbeddedKafkaAddr = "127.0.0.1:0"
	}
	if tweak != nil {
		tweak(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := app.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start laneway: %v", err)
	}
	t.Cleanup(a.Stop)
	return a
}

// scenario starts a receiver fleet and a Laneway on b; both stop when the
// test ends, Laneway first, so its last attempts still find the receivers.
func scenario(t *testing.T, b testenv.Backend, tweak func(*app.Config)) (*fleet.Fleet, *app.App, apiClient) {
	t.Helper()
	f, err := fleet.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	a := startApp(t, b, tweak)
	return f, a, apiClient{t: t, base: "http://" + a.HTTPAddr()}
}

type apiClient struct {
	t    *testing.T
	base string
}

func (c apiClient) do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

type createdEndpoint struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

func (c apiClient) createEndpoint(body map[string]any) createdEndpoint {
	c.t.Helper()
	code, out := c.do("POST", "/v1/endpoints", body)
	if code != http.StatusCreated {
		c.t.Fatalf("create endpoint: %d %s", code, out)
	}
	var ep createdEndpoint
	if err := json.Unmarshal(out, &ep); err != nil || ep.ID == "" || ep.Secret == "" {
		c.t.Fatalf("create endpoint response %s: %v", out, err)
	}
	return ep
}

var eventTypes = []string{"order.updated", "payment.approved", "customer.created"}

// subscription is one test endpoint's config and its receiver.
type subscription struct {
	tenant   string
	types    []string
	limit    int
	id       string
	receiver *fleet.Endpoint
}

func (s subscription) wants(tenant, typ string) bool {
	return s.tenant == tenant && (len(s.types) == 0 || slices.Contains(s.types, typ))
}

// TestEndToEnd publishes 10,000 events over 200 entities to 20 endpoints of
// 3 tenants and checks that each endpoint receives exactly its events, in
// revision order per entity, within its concurrency limit, all signed.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		f, a, api := scenario(t, b, nil)
		subs := createSubscriptions(t, api, f)

		const events, entities = 10000, 200
		expected := publishEvents(t, a, events, entities, subs)
		total := 0
		for _, ids := range expected {
			total += len(ids)
		}
		waitForTotal(t, f, int64(total), 3*time.Minute)
		checkDeliveries(t, subs, expected)
	})
}

func createSubscriptions(t *testing.T, api apiClient, f *fleet.Fleet) []subscription {
	var subs []subscription
	for i := range 20 {
		s := subscription{tenant: fmt.Sprintf("tenant-%d", i%3), limit: 1 + i%5}
		switch i % 4 {
		case 1:
			s.types = eventTypes[:1]
		case 2:
			s.types = eventTypes[1:]
		}
		// The receiver answers slowly enough for requests to overlap, so
		// the concurrency limit is actually exercised.
		slow := func(w http.ResponseWriter, _ *http.Request, _ int) {
			time.Sleep(time.Millisecond)
			w.WriteHeader(http.StatusOK)
		}
		ep := api.createEndpoint(map[string]any{
			"tenant": s.tenant, "url": f.URL(i), "event_types": s.types, "max_concurrency": s.limit,
		})
		s.id = ep.ID
		recv, err := f.Add(i, ep.Secret, slow)
		if err != nil {
			t.Fatal(err)
		}
		s.receiver = recv
		subs = append(subs, s)
	}
	return subs
}

// publishEvents writes events straight to the topic, as producers do, and
// returns the event ids each endpoint must receive. opts are the producer's
// connection settings (TLS, SASL), if any.
func publishEvents(t *testing.T, a *app.App, n, entities int, subs []subscription, opts ...kgo.Opt) map[string][]string {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.Brokers()...), kgo.DefaultProduceTopic(eventsTopic(a))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	expected := map[string][]string{}
	revisions := make([]int64, entities)
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		e := i % entities
		revisions[e]++
		env := event.Envelope{
			ID: fmt.Sprintf("evt-%d", i), Type: eventTypes[(i/entities)%len(eventTypes)],
			Tenant: fmt.Sprintf("tenant-%d", e%3), Entity: fmt.Sprintf("order:%d", e),
			Revision: revisions[e], OccurredAt: time.Now().UTC(), Data: json.RawMessage(`{"n":` + fmt.Sprint(i) + `}`),
		}
		value, _ := json.Marshal(env)
		recs = append(recs, &kgo.Record{Key: []byte(env.Entity), Value: value})
		for _, s := range subs {
			if s.wants(env.Tenant, env.Type) {
				expected[s.id] = append(expected[s.id], env.ID)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("publish: %v", err)
	}
	return expected
}

func eventsTopic(a *app.App) string { return a.Topics().Events }

func waitForTotal(t *testing.T, f *fleet.Fleet, want int64, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for f.Total() < want {
		select {
		case <-f.Changed():
		case <-deadline.C:
			t.Fatalf("only %d of %d deliveries arrived within %s", f.Total(), want, timeout)
		}
	}
}

func checkDeliveries(t *testing.T, subs []subscription, expected map[string][]string) {
	t.Helper()
	reachedLimit := false
	for _, s := range subs {
		receipts := s.receiver.Receipts()
		got := make([]string, 0, len(receipts))
		for _, r := range receipts {
			got = append(got, r.MsgID)
		}
		want := slices.Clone(expected[s.id])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("endpoint %s (%s %v): got %d deliveries, want %d", s.id, s.tenant, s.types, len(got), len(want))
		}
		checkOrder(t, s.id, receipts)
		if m := s.receiver.MaxInFlight(); m > int64(s.limit) {
			t.Errorf("endpoint %s saw %d concurrent requests, limit %d", s.id, m, s.limit)
		} else if s.limit > 1 && m == int64(s.limit) {
			reachedLimit = true
		}
		if bad := s.receiver.BadSignatures(); bad != 0 {
			t.Errorf("endpoint %s: %d deliveries failed signature verification", s.id, bad)
		}
	}
	if !reachedLimit {
		t.Errorf("no endpoint ever used its full concurrency limit: lanes are not running in parallel")
	}
}

// checkOrder requires revisions of each entity to arrive strictly increasing.
func checkOrder(t *testing.T, endpointID string, receipts []fleet.Receipt) {
	t.Helper()
	last := map[string]int64{}
	for _, r := range receipts {
		if prev, ok := last[r.Entity]; ok && r.Revision <= prev {
			t.Errorf("endpoint %s entity %s: revision %d arrived after %d", endpointID, r.Entity, r.Revision, prev)
			return
		}
		last[r.Entity] = r.Revision
	}
}

// testLogger discards logs unless LANEWAY_TEST_LOG is set (to a level).
func testLogger() *slog.Logger {
	level := os.Getenv("LANEWAY_TEST_LOG")
	if level == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}
