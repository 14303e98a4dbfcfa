package inbound

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stripe/stripe-go/v82/webhook"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/testenv"
	"github.com/laneway/laneway/signing"
)

func eachBackend(t *testing.T, fn func(t *testing.T, b testenv.Backend)) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
	}
}

// fixture is one test's topics, group, Redis key space and services.
type fixture struct {
	t      testing.TB
	b      testenv.Backend
	topics topics.Config
	group  string
	prefix string
	rdb    *redis.Client
}

func newFixture(t testing.TB, b testenv.Backend) *fixture {
	t.Helper()
	ns := testenv.Unique("inb")
	f := &fixture{t: t, b: b, topics: topics.Config{Partitions: 4}.WithPrefix(ns).WithDefaults(), group: ns, prefix: ns + ":"}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := topics.Ensure(ctx, kadm.NewClient(cl), f.topics); err != nil {
		t.Fatal(err)
	}
	opts, err := redis.ParseURL(b.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	f.rdb = redis.NewClient(opts)
	t.Cleanup(func() { _ = f.rdb.Close() })
	return f
}

func (f *fixture) config() Config {
	return Config{
		Brokers: f.b.Brokers, Topics: f.topics, Redis: f.rdb, Group: f.group, InstanceID: "test",
		KeyPrefix: f.prefix, SessionTimeout: 6 * time.Second, Registerer: prometheus.NewRegistry(), Logger: testenv.Logger(),
		// Every test client is one address; the tests of the limits set them.
		RateLimits: RateLimits{PerAddress: -1, PerSource: -1},
	}
}

// service starts a Service; it stops when the test ends (Stop is idempotent).
func (f *fixture) service(tweak func(*Config), beforeStart func(*Service)) *Service {
	f.t.Helper()
	cfg := f.config()
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	if beforeStart != nil {
		beforeStart(s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		testenv.Stop(f.t, s.Stop)
		f.t.Fatal(err)
	}
	testenv.StopOnCleanup(f.t, s.Stop)
	return s
}

// server serves the service's routes (without the API's token check).
func server(t testing.TB, s *Service) *client {
	mux := http.NewServeMux()
	for _, r := range s.Routes() {
		mux.Handle(r.Pattern, r.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &client{t: t, base: srv.URL}
}

type client struct {
	t     testing.TB
	base  string
	token string
}

// raw sends body with headers h and returns the status and response body.
func (c *client) raw(method, path string, body []byte, h http.Header) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// json sends v as JSON and decodes the answer into out (when not nil),
// failing the test unless the status is want.
func (c *client) json(method, path string, v any, want int, out any) {
	c.t.Helper()
	var body []byte
	if v != nil {
		body, _ = json.Marshal(v)
	}
	code, resp := c.raw(method, path, body, http.Header{"Content-Type": {"application/json"}})
	if code != want {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, code, resp, want)
	}
	if out != nil {
		if err := json.Unmarshal(resp, out); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, resp)
		}
	}
}

func (c *client) createSource(req map[string]any) sourceJSON {
	c.t.Helper()
	var out sourceJSON
	c.json(http.MethodPost, "/v1/inbound/sources", req, http.StatusCreated, &out)
	return out
}

// capture posts a webhook and returns the request id from the 202.
func (c *client) capture(source string, body []byte, h http.Header) string {
	c.t.Helper()
	code, resp := c.raw(http.MethodPost, "/in/"+source, body, h)
	if code != http.StatusAccepted {
		c.t.Fatalf("capture to %s: %d %s", source, code, resp)
	}
	var out struct{ ID string }
	_ = json.Unmarshal(resp, &out)
	if _, _, ok := ParseRequestID(out.ID); !ok {
		c.t.Fatalf("capture answered %s", resp)
	}
	return out.ID
}

func (c *client) list(query string) []Item {
	c.t.Helper()
	var all []Item
	cursor := ""
	for {
		q := query
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		var page Page
		c.json(http.MethodGet, "/v1/inbound/requests?"+q, nil, http.StatusOK, &page)
		all = append(all, page.Items...)
		if page.Next == "" {
			return all
		}
		cursor = page.Next
	}
}

// Signers for each kind, at the given time.

func stripeHeaders(secret string, at time.Time, body []byte) http.Header {
	p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
	return http.Header{"Stripe-Signature": {p.Header}, "Content-Type": {"application/json"}}
}

func githubHeaders(secret, delivery, event string, body []byte) http.Header {
	return http.Header{
		"X-Hub-Signature-256": {githubSignature(secret, body)}, "X-Github-Delivery": {delivery},
		"X-Github-Event": {event}, "Content-Type": {"application/json"},
	}
}

func standardHeaders(t *testing.T, secret, id string, at time.Time, body []byte) http.Header {
	h, err := signing.Headers(id, at, body, []string{secret})
	if err != nil {
		t.Fatal(err)
	}
	h.Set("Content-Type", "application/json")
	return h
}

func stripeBody(i int) []byte {
	// Whitespace and key order a re-encoding would change.
	return fmt.Appendf(nil, "{\"id\": \"evt_%d\",\n  \"type\":\"invoice.paid\" , \"data\":{\"object\":{\"id\":\"in_%d\",\"z\":1,\"a\":2}}}\n", i, i)
}

// waitVerifier waits until cond holds for the verifier's committed totals
// and the inbound topic shows those commits to read_committed readers.
func waitVerifier(t testing.TB, s *Service, what string, cond func(map[string]int64) bool) map[string]int64 {
	t.Helper()
	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	for {
		totals, changed := s.verifier.progress()
		if cond(totals) {
			// Let the outcomes' commit markers land, so listings see them.
			readCommitted(t, s.cfg.Brokers, s.cfg.Topics.Inbound)
			return totals
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; committed outcomes %v", what, totals)
		}
	}
}

func atLeast(status string, n int64) func(map[string]int64) bool {
	return func(m map[string]int64) bool { return m[status] >= n }
}

func decidedAtLeast(n int64) func(map[string]int64) bool {
	return func(m map[string]int64) bool {
		return m[StatusVerified]+m[StatusRejected]+m[StatusDuplicate] >= n
	}
}

// envelopes reads every committed record of the events topic.
func (f *fixture) envelopes(t testing.TB) []*kgo.Record {
	t.Helper()
	return readCommitted(t, f.b.Brokers, f.topics.Events)
}

// readCommitted reads topic read_committed up to its end as of the call.
// Commit markers are written just after a transaction ends, so the
// consumer keeps control records and reads until it has seen the last
// offset of every partition (blocking in the broker's fetch wait, not
// sleeping): after it returns, listings and reads see every transaction
// committed before the call.
func readCommitted(t testing.TB, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	need := map[int32]int64{} // partition -> last offset to see
	ends.Each(func(end kadm.ListedOffset) {
		if end.Offset > 0 {
			need[end.Partition] = end.Offset - 1
		}
	})
	var out []*kgo.Record
	if len(need) == 0 {
		return out
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for len(need) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s not read to its end: still waiting for %v", topic, need)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if last, ok := need[r.Partition]; ok && r.Offset >= last {
				delete(need, r.Partition)
			}
		})
	}
	return out
}

func parseEnvelopes(t *testing.T, recs []*kgo.Record) []event.Envelope {
	t.Helper()
	out := make([]event.Envelope, 0, len(recs))
	for _, r := range recs {
		env, err := event.ParseEnvelope(r.Value, time.Now())
		if err != nil {
			t.Fatalf("events record %s is not a valid envelope: %v", r.Value, err)
		}
		out = append(out, env)
	}
	return out
}

func countBy[T any](items []T, key func(T) string) map[string]int {
	out := map[string]int{}
	for _, it := range items {
		out[key(it)]++
	}
	return out
}
