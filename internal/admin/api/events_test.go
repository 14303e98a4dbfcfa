package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/laneway/laneway/internal/model/event"
)

const orderEvent = `{"type":"order.updated","tenant":"acme","entity":"order:123","revision":17,"coalesce":true,"data":{"total":42}}`

func orderEventWithID(id string) string {
	return `{"id":"` + id + `","type":"order.updated","tenant":"acme","entity":"order:123","revision":17}`
}

func decodeResult(t *testing.T, r response) ingestResult {
	t.Helper()
	var res ingestResult
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatalf("202 body %q: %v", r.body, err)
	}
	return res
}

func TestIngestEvent(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("POST", "/v1/events", orderEvent)
	wantStatus(t, r, http.StatusAccepted)
	wantJSONContent(t, r)
	res := decodeResult(t, r)

	pub := h.pub.published()
	if len(pub) != 1 {
		t.Fatalf("published %d events, want 1", len(pub))
	}
	env := pub[0]
	if _, err := uuid.Parse(res.ID); err != nil || env.ID != res.ID {
		t.Fatalf("response id %q, published id %q: want the same generated uuid", res.ID, env.ID)
	}
	if res.Partition != fakePartition || res.Offset != 101 {
		t.Fatalf("result = %+v, want partition %d offset 101", res, fakePartition)
	}
	if env.Tenant != "acme" || env.Entity != "order:123" || env.Revision != 17 || !env.Coalesce ||
		string(env.Data) != `{"total":42}` || !env.OccurredAt.Equal(t0) {
		t.Fatalf("published envelope %+v", env)
	}
	if r.header.Get(replayedHeader) != "" {
		t.Fatal("a first request is marked as replayed")
	}
}

func TestIngestKeepsClientID(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("POST", "/v1/events", orderEventWithID("evt_client_1"))
	wantStatus(t, r, http.StatusAccepted)
	if res := decodeResult(t, r); res.ID != "evt_client_1" {
		t.Fatalf("id = %q", res.ID)
	}
	if pub := h.pub.published(); len(pub) != 1 || pub[0].ID != "evt_client_1" {
		t.Fatalf("published %+v", pub)
	}
}

func TestIngestInvalidEvents(t *testing.T) {
	oversized := `{"type":"t","tenant":"acme","entity":"e","data":"` + strings.Repeat("x", event.MaxEnvelopeBytes) + `"}`
	cases := []struct {
		name, body, reason, field string
	}{
		{"missing entity", `{"type":"t","tenant":"acme"}`, "entity is required", "entity"},
		{"missing tenant", `{"type":"t","entity":"e"}`, "tenant is required", "tenant"},
		{"malformed JSON", `{"type":"t",`, "malformed JSON", ""},
		{"unknown field", `{"type":"t","tenant":"acme","entity":"e","colour":"red"}`, "unknown field", "colour"},
		{"wrong type", `{"type":"t","tenant":"acme","entity":"e","revision":"7"}`, "malformed JSON", "revision"},
		{"invalid UTF-8", "{\"type\":\"t\",\"tenant\":\"acme\",\"entity\":\"e\xff\"}", "not valid UTF-8", ""},
		{"oversized", oversized, "the limit is", ""},
		{"negative revision", `{"type":"t","tenant":"acme","entity":"e","revision":-1}`, "revision", "revision"},
	}
	h := newHarness(t, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", "/v1/events", tc.body, "Idempotency-Key", "k-"+tc.name)
			wantStatus(t, r, http.StatusBadRequest)
			got := r.json(t)
			reason, _ := got["reason"].(string)
			if !strings.Contains(reason, tc.reason) {
				t.Fatalf("reason %q does not contain %q", reason, tc.reason)
			}
			if got["error"] != "invalid event: "+reason {
				t.Fatalf("error = %v, want invalid event: %s", got["error"], reason)
			}
			if field, _ := got["field"].(string); field != tc.field {
				t.Fatalf("field = %q, want %q", field, tc.field)
			}
		})
	}
	if n := len(h.pub.published()); n != 0 {
		t.Fatalf("invalid events were published: %d", n)
	}
	if keys := h.mr.Keys(); len(keys) != 0 {
		t.Fatalf("invalid events left idempotency keys: %v", keys)
	}
}

// An id holding CR/LF was accepted with a 202, and every attempt of its
// deliveries then failed inside Laneway, holding its entity for up to
// 72 h (#27). Control characters in id, type, tenant or entity get a 400
// naming the field, and nothing is published.
func TestIngestRefusesControlCharacters(t *testing.T) {
	h := newHarness(t, nil)
	for _, field := range []string{"id", "type", "tenant", "entity"} {
		fields := map[string]string{"id": "evt_1", "type": "t", "tenant": "acme", "entity": "e"}
		fields[field] = "x\r\nX-Injected: 1"
		body, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		r := h.do("POST", "/v1/events", string(body))
		wantStatus(t, r, http.StatusBadRequest)
		got := r.json(t)
		if reason, _ := got["reason"].(string); !strings.Contains(reason, field+" holds a control character") || got["field"] != field {
			t.Errorf("%s: body %s, want a reason and field naming the control character in %s", field, r.body, field)
		}
	}
	if n := len(h.pub.published()); n != 0 {
		t.Fatalf("%d events with control characters were published", n)
	}
}

func TestIngestBodyLimits(t *testing.T) {
	h := newHarness(t, nil)
	huge := `{"data":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}`
	r := h.do("POST", "/v1/events", huge)
	wantStatus(t, r, http.StatusRequestEntityTooLarge)
	if msg, _ := r.json(t)["error"].(string); !strings.Contains(msg, strconv.Itoa(DefaultMaxBodyBytes)) {
		t.Fatalf("error %q does not state the limit", msg)
	}
	wantStatus(t, h.do("POST", "/v1/events", orderEvent, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType)
	if n := len(h.pub.published()); n != 0 {
		t.Fatalf("published %d", n)
	}
	// A JSON media type with parameters or a +json suffix is fine.
	wantStatus(t, h.do("POST", "/v1/events", orderEvent, "Content-Type", "application/json; charset=utf-8"), http.StatusAccepted)
}

func TestIdempotencyKeyReplays(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.IdempotencyTTL = 2 * time.Hour })
	first := h.do("POST", "/v1/events", orderEvent, "Idempotency-Key", "req-1")
	wantStatus(t, first, http.StatusAccepted)
	second := h.do("POST", "/v1/events", orderEvent, "Idempotency-Key", "req-1")
	wantStatus(t, second, http.StatusAccepted)

	if n := len(h.pub.published()); n != 1 {
		t.Fatalf("published %d times, want 1", n)
	}
	if string(second.body) != string(first.body) {
		t.Fatalf("replay body %q differs from %q", second.body, first.body)
	}
	if second.header.Get(replayedHeader) != "true" || first.header.Get(replayedHeader) != "" {
		t.Fatalf("Idempotent-Replayed: first %q, second %q", first.header.Get(replayedHeader), second.header.Get(replayedHeader))
	}
	key := "laneway:idem:acme:req-1"
	if ttl := h.mr.TTL(key); ttl != 2*time.Hour {
		t.Fatalf("TTL of %s = %v, want the IdempotencyTTL", key, ttl)
	}
	stored, _ := h.mr.Get(key)
	var rec storedIngest
	if err := json.Unmarshal([]byte(stored), &rec); err != nil || rec.Result != decodeResult(t, first) || rec.Fingerprint != fingerprint([]byte(orderEvent)) {
		t.Fatalf("stored %q (%v), response %q", stored, err, first.body)
	}
}

// TestIdempotencyKeyReusedWithADifferentBodyIs422: a key names one
// request. Reused for another event, the second event must not be dropped
// behind a 202 for the first: the client is told, and nothing is published.
func TestIdempotencyKeyReusedWithADifferentBodyIs422(t *testing.T) {
	h := newHarness(t, nil)
	first := h.do("POST", "/v1/events", orderEventWithID("evt_a"), "Idempotency-Key", "req-1")
	wantStatus(t, first, http.StatusAccepted)
	for name, body := range map[string]string{
		"other id":       orderEventWithID("evt_b"),
		"other revision": strings.Replace(orderEventWithID("evt_a"), `"revision":17`, `"revision":18`, 1),
	} {
		r := h.do("POST", "/v1/events", body, "Idempotency-Key", "req-1")
		wantStatus(t, r, http.StatusUnprocessableEntity)
		if got := r.json(t)["reason"]; got != "idempotency_key_reused" {
			t.Errorf("%s: reason = %v, want idempotency_key_reused; body %s", name, got, r.body)
		}
	}
	// The same event, reformatted, is the same request: a replay.
	same := `{ "revision":17, "entity":"order:123", "tenant":"acme", "type":"order.updated", "id":"evt_a" }`
	r := h.do("POST", "/v1/events", same, "Idempotency-Key", "req-1")
	wantStatus(t, r, http.StatusAccepted)
	if string(r.body) != string(first.body) || r.header.Get(replayedHeader) != "true" {
		t.Fatalf("same event reformatted: want a replay of %q, got %q", first.body, r.body)
	}
	if pub := h.pub.published(); len(pub) != 1 || pub[0].ID != "evt_a" {
		t.Fatalf("published %+v, want only evt_a", pub)
	}
}

// TestEventIDReusedWithADifferentBodyIs422: without an Idempotency-Key the
// client's event id is the key, with the same rule.
func TestEventIDReusedWithADifferentBodyIs422(t *testing.T) {
	h := newHarness(t, nil)
	wantStatus(t, h.do("POST", "/v1/events", orderEventWithID("evt_1")), http.StatusAccepted)
	other := strings.Replace(orderEventWithID("evt_1"), `"order:123"`, `"order:456"`, 1)
	wantStatus(t, h.do("POST", "/v1/events", other), http.StatusUnprocessableEntity)
	if n := len(h.pub.published()); n != 1 {
		t.Fatalf("published %d, want 1", n)
	}
}

func TestEventIDDeduplicates(t *testing.T) {
	h := newHarness(t, nil)
	first := h.do("POST", "/v1/events", orderEventWithID("evt_1"))
	second := h.do("POST", "/v1/events", orderEventWithID("evt_1"))
	wantStatus(t, first, http.StatusAccepted)
	wantStatus(t, second, http.StatusAccepted)
	if n := len(h.pub.published()); n != 1 {
		t.Fatalf("published %d times, want 1", n)
	}
	if string(second.body) != string(first.body) || second.header.Get(replayedHeader) != "true" {
		t.Fatalf("second = %q (replayed %q)", second.body, second.header.Get(replayedHeader))
	}
	if !h.mr.Exists("laneway:idem:acme:evt_1") {
		t.Fatalf("keys %v, want laneway:idem:acme:evt_1", h.mr.Keys())
	}
}

func TestNoKeyNoDedup(t *testing.T) {
	h := newHarness(t, nil)
	a := decodeResult(t, h.do("POST", "/v1/events", orderEvent))
	b := decodeResult(t, h.do("POST", "/v1/events", orderEvent))
	if a.ID == b.ID {
		t.Fatalf("two requests without id got the same generated id %q", a.ID)
	}
	if n := len(h.pub.published()); n != 2 {
		t.Fatalf("published %d, want 2", n)
	}
	if keys := h.mr.Keys(); len(keys) != 0 {
		t.Fatalf("keys %v, want none", keys)
	}
}

func TestIdempotencyKeysAreScopedByTenant(t *testing.T) {
	h := newHarness(t, nil)
	ev := func(tenant string) string {
		return `{"type":"t","tenant":"` + tenant + `","entity":"e"}`
	}
	for _, req := range []struct{ tenant, key string }{
		{"acme", "k"}, {"globex", "k"},
		// Without escaping both would be laneway:idem:a:b:c.
		{"a:b", "c"}, {"a", "b:c"},
	} {
		r := h.do("POST", "/v1/events", ev(req.tenant), "Idempotency-Key", req.key)
		wantStatus(t, r, http.StatusAccepted)
		if r.header.Get(replayedHeader) != "" {
			t.Fatalf("tenant %q key %q was answered with another tenant's result", req.tenant, req.key)
		}
	}
	if n := len(h.pub.published()); n != 4 {
		t.Fatalf("published %d, want 4", n)
	}
	if !h.mr.Exists("laneway:idem:a%3Ab:c") || !h.mr.Exists("laneway:idem:a:b:c") {
		t.Fatalf("keys %v", h.mr.Keys())
	}
}

func TestLongIdempotencyKeyIsHashed(t *testing.T) {
	h := newHarness(t, nil)
	long := strings.Repeat("k", 300)
	wantStatus(t, h.do("POST", "/v1/events", orderEvent, "Idempotency-Key", long), http.StatusAccepted)
	r := h.do("POST", "/v1/events", orderEvent, "Idempotency-Key", long)
	wantStatus(t, r, http.StatusAccepted)
	if r.header.Get(replayedHeader) != "true" || len(h.pub.published()) != 1 {
		t.Fatal("long key did not deduplicate")
	}
	sum := sha256.Sum256([]byte(long))
	if want := "laneway:idem:acme:" + hex.EncodeToString(sum[:]); !h.mr.Exists(want) {
		t.Fatalf("keys %v, want %s", h.mr.Keys(), want)
	}
}

func TestRedisDownStillPublishes(t *testing.T) {
	h := newHarness(t, nil)
	h.mr.Close()
	for range 2 {
		r := h.do("POST", "/v1/events", orderEvent, "Idempotency-Key", "req-1")
		wantStatus(t, r, http.StatusAccepted)
	}
	if n := len(h.pub.published()); n != 2 {
		t.Fatalf("published %d, want 2 (no dedup without Redis, but no loss)", n)
	}
	if !strings.Contains(h.logs.String(), "publishing without deduplication") {
		t.Fatalf("Redis failure not logged: %s", h.logs.String())
	}
}

func TestNoRedisConfiguredMeansNoDedup(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Redis = nil })
	for range 2 {
		wantStatus(t, h.do("POST", "/v1/events", orderEventWithID("evt_1"), "Idempotency-Key", "req-1"), http.StatusAccepted)
	}
	if n := len(h.pub.published()); n != 2 {
		t.Fatalf("published %d, want 2", n)
	}
}

func TestPublishFailureReleasesKey(t *testing.T) {
	h := newHarness(t, nil)
	h.pub.setErr(errBroker)
	r := h.do("POST", "/v1/events", orderEventWithID("evt_1"), "Idempotency-Key", "req-1")
	wantStatus(t, r, http.StatusServiceUnavailable)
	if msg, _ := r.json(t)["error"].(string); !strings.Contains(msg, errBroker.Error()) {
		t.Fatalf("error %q lacks the cause", msg)
	}
	if keys := h.mr.Keys(); len(keys) != 0 {
		t.Fatalf("key not released after a failed publish: %v", keys)
	}

	h.pub.setErr(nil)
	r = h.do("POST", "/v1/events", orderEventWithID("evt_1"), "Idempotency-Key", "req-1")
	wantStatus(t, r, http.StatusAccepted)
	if r.header.Get(replayedHeader) != "" {
		t.Fatal("retry after a failure was answered as a replay")
	}
	if pub := h.pub.published(); len(pub) != 1 || pub[0].ID != "evt_1" {
		t.Fatalf("published %+v, want evt_1 once", pub)
	}
}

func TestConcurrentDuplicateWhilePendingIs409(t *testing.T) {
	h := newHarness(t, nil)
	// Buffered so that a second Publish, which would be a bug, fails the
	// count below instead of hanging the test.
	h.pub.entered = make(chan struct{}, 1)
	h.pub.release = make(chan struct{})

	firstDone := make(chan response, 1)
	go func() { firstDone <- h.do("POST", "/v1/events", orderEvent, "Idempotency-Key", "req-1") }()
	<-h.pub.entered // the first request holds the key and is publishing

	key := "laneway:idem:acme:req-1"
	if v, _ := h.mr.Get(key); v != pendingValue+":"+fingerprint([]byte(orderEvent)) {
		t.Fatalf("key = %q while publishing, want %q and the request's fingerprint", v, pendingValue)
	}
	if ttl := h.mr.TTL(key); ttl != pendingTTL {
		t.Fatalf("pending TTL = %v, want %v", ttl, pendingTTL)
	}
	other := h.do("POST", "/v1/events", orderEventWithID("evt_other"), "Idempotency-Key", "req-1")
	wantStatus(t, other, http.StatusUnprocessableEntity)
	dup := h.do("POST", "/v1/events", orderEvent, "Idempotency-Key", "req-1")
	wantStatus(t, dup, http.StatusConflict)
	if got := dup.json(t)["error"]; got != "a request with this idempotency key is in progress" {
		t.Fatalf("error = %v", got)
	}

	close(h.pub.release)
	first := <-firstDone
	wantStatus(t, first, http.StatusAccepted)

	replay := h.do("POST", "/v1/events", orderEvent, "Idempotency-Key", "req-1")
	wantStatus(t, replay, http.StatusAccepted)
	if string(replay.body) != string(first.body) || replay.header.Get(replayedHeader) != "true" {
		t.Fatalf("replay %q, first %q", replay.body, first.body)
	}
	if n := len(h.pub.published()); n != 1 {
		t.Fatalf("published %d, want 1", n)
	}
}

func TestCorruptIdempotencyValuePublishes(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.mr.Set("laneway:idem:acme:req-1", "garbage"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.do("POST", "/v1/events", orderEvent, "Idempotency-Key", "req-1"), http.StatusAccepted)
	if n := len(h.pub.published()); n != 1 {
		t.Fatalf("published %d, want 1", n)
	}
}

// TestResultStoredBeforeFingerprintsReplays: a key written by an older
// version (a bare result, no fingerprint) still answers its replay.
func TestResultStoredBeforeFingerprintsReplays(t *testing.T) {
	h := newHarness(t, nil)
	old := `{"id":"evt_old","partition":3,"offset":9}`
	if err := h.mr.Set("laneway:idem:acme:req-1", old); err != nil {
		t.Fatal(err)
	}
	r := h.do("POST", "/v1/events", orderEvent, "Idempotency-Key", "req-1")
	wantStatus(t, r, http.StatusAccepted)
	if string(r.body) != old+"\n" || r.header.Get(replayedHeader) != "true" {
		t.Fatalf("got %q, want a replay of %q", r.body, old)
	}
	if n := len(h.pub.published()); n != 0 {
		t.Fatalf("published %d, want 0", n)
	}
}
