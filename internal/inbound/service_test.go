package inbound

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestFrontDoorEndToEnd takes signed requests from each provider's scheme
// through capture, verification, dedup and forwarding, and checks what
// reaches the events topic and what the listing says.
func TestFrontDoorEndToEnd(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		f := newFixture(t, b)
		reg := prometheus.NewRegistry()
		s := f.service(func(c *Config) { c.Registerer = reg }, nil)
		c := server(t, s)

		stripe := c.createSource(map[string]any{"id": "stripe", "kind": "stripe", "tenant": "acme", "secret": "whsec_stripe"})
		gh := c.createSource(map[string]any{"id": "gh", "kind": "github", "tenant": "acme"})
		slk := c.createSource(map[string]any{"id": "slack", "kind": "slack", "tenant": "beta", "secret": "slack-signing-secret"})
		std := c.createSource(map[string]any{"id": "std", "kind": "standard", "tenant": "beta", "type_prefix": "partner."})
		if gh.Secret == "" || !strings.HasPrefix(std.Secret, "whsec_") || stripe.Secret != "whsec_stripe" || slk.CapturePath != "/in/slack" {
			t.Fatalf("created sources: %+v %+v %+v", gh, std, stripe)
		}
		// GET never shows secrets.
		var got sourceJSON
		c.json(http.MethodGet, "/v1/inbound/sources/gh", nil, http.StatusOK, &got)
		if got.Secret != "" || got.PreviousSecret != "" {
			t.Fatalf("GET shows secrets: %+v", got)
		}

		now := time.Now()
		sBody := stripeBody(1)
		ghBody := []byte("{\"ref\" : \"refs/heads/main\",\n\"repository\":{\"full_name\":\"acme/app\"}}")
		slBody := []byte(`{"type":"event_callback","event_id":"Ev1","event":{"type":"message","channel":"C1","text":"<hi> & bye"}}`)
		stBody := []byte(`{"type":"order.paid",   "data":{"id":"ord_9","total":5}}`)
		bodies := map[string][]byte{"stripe": sBody, "gh": ghBody, "slack": slBody, "std": stBody}

		ids := map[string]string{
			"stripe": c.capture("stripe", sBody, stripeHeaders("whsec_stripe", now, sBody)),
			"gh":     c.capture("gh", ghBody, githubHeaders(gh.Secret, "d-1", "push", ghBody)),
			"slack":  c.capture("slack", slBody, slackHeaders("slack-signing-secret", now, slBody)),
			"std":    c.capture("std", stBody, standardHeaders(t, std.Secret, "msg_1", now, stBody)),
		}
		// A provider retry (same delivery id, same body). A tampered body and
		// a stale timestamp are refused at the door (401) and kept as
		// metadata, which the verify stage records as rejected.
		dupID := c.capture("gh", ghBody, githubHeaders(gh.Secret, "d-1", "push", ghBody))
		if code, _ := c.raw(http.MethodPost, "/in/stripe", tampered(sBody), stripeHeaders("whsec_stripe", now, sBody)); code != http.StatusUnauthorized {
			t.Fatalf("tampered body: %d, want 401", code)
		}
		if code, _ := c.raw(http.MethodPost, "/in/slack", slBody, slackHeaders("slack-signing-secret", now.Add(-time.Hour), slBody)); code != http.StatusUnauthorized {
			t.Fatalf("stale timestamp: %d, want 401", code)
		}

		totals := waitVerifier(t, s, "7 outcomes", decidedAtLeast(7))
		if totals[StatusVerified] != 4 || totals[StatusDuplicate] != 1 || totals[StatusRejected] != 2 {
			t.Fatalf("outcomes %v, want 4 verified, 1 duplicate, 2 rejected", totals)
		}

		envs := parseEnvelopes(t, f.envelopes(t))
		if len(envs) != 4 {
			t.Fatalf("%d envelopes on the events topic, want 4", len(envs))
		}
		byType := map[string]event.Envelope{}
		for _, e := range envs {
			byType[e.Type] = e
		}
		for typ, want := range map[string]struct{ tenant, entity, source string }{
			"stripe.invoice.paid": {"acme", "in_1", "stripe"},
			"github.push":         {"acme", "acme/app", "gh"},
			"slack.message":       {"beta", "C1", "slack"},
			"partner.order.paid":  {"beta", "ord_9", "std"},
		} {
			e, ok := byType[typ]
			if !ok {
				t.Errorf("no %s envelope; got %v", typ, countBy(envs, func(e event.Envelope) string { return e.Type }))
				continue
			}
			if e.Tenant != want.tenant || e.Entity != want.entity {
				t.Errorf("%s: tenant %q entity %q, want %q %q", typ, e.Tenant, e.Entity, want.tenant, want.entity)
			}
			if !bytes.Equal(bytes.TrimSpace(e.Data), bytes.TrimSpace(bodies[want.source])) {
				t.Errorf("%s: data %q is not the body %q byte for byte", typ, e.Data, bodies[want.source])
			}
		}

		// The listing, from Kafka alone.
		verified := c.list("status=verified")
		if len(verified) != 4 {
			t.Fatalf("listed %d verified, want 4: %+v", len(verified), verified)
		}
		for _, it := range verified {
			if it.ID != ids[it.Source] || it.EventID == "" || it.VerifiedAt.IsZero() {
				t.Errorf("verified item %+v (want id %s)", it, ids[it.Source])
			}
		}
		dups := c.list("status=duplicate")
		if len(dups) != 1 || dups[0].ID != dupID || dups[0].DuplicateOf != ids["gh"] || !strings.HasPrefix(dups[0].DedupKey, "sha256:") {
			t.Fatalf("duplicates %+v", dups)
		}
		rejected := countBy(c.list("status=rejected"), func(it Item) string { return it.Source + "=" + it.Reason })
		if rejected["stripe="+ReasonBadSignature] != 1 || rejected["slack="+ReasonStaleTimestamp] != 1 {
			t.Fatalf("rejected %v", rejected)
		}
		if n := len(c.list("source=gh")); n != 2 {
			t.Errorf("source=gh listed %d, want 2", n)
		}
		if n := len(c.list("source=gh&until=" + now.Add(-time.Hour).Format(time.RFC3339))); n != 0 {
			t.Errorf("a range before everything listed %d", n)
		}
		if n := len(c.list("status=pending")); n != 0 {
			t.Errorf("%d pending after every outcome committed", n)
		}

		// The captured request, byte for byte.
		code, raw := c.raw(http.MethodGet, "/v1/inbound/requests/"+ids["stripe"]+"/body", nil, nil)
		if code != http.StatusOK || !bytes.Equal(raw, sBody) {
			t.Fatalf("body of %s: %d %q", ids["stripe"], code, raw)
		}
		var detail requestJSON
		c.json(http.MethodGet, "/v1/inbound/requests/"+ids["gh"], nil, http.StatusOK, &detail)
		if detail.Source != "gh" || detail.Method != "POST" || detail.Path != "/in/gh" || detail.Headers.Get("X-Github-Event") != "push" ||
			detail.Body == nil || *detail.Body != string(ghBody) {
			t.Fatalf("detail %+v", detail)
		}

		// Metrics: ACK latency per source, outcomes with reasons, delay.
		if n := seriesCount(t, reg, "laneway_inbound_ack_duration_seconds"); n < 4 {
			t.Errorf("%d ACK latency series, want one per source", n)
		}
		wantCounter(t, reg, "laneway_inbound_verifications_total", map[string]string{"source": "stripe", "outcome": "rejected", "reason": ReasonBadSignature}, 1)
		wantCounter(t, reg, "laneway_inbound_verifications_total", map[string]string{"source": "gh", "outcome": "duplicate", "reason": ""}, 1)
		wantCounter(t, reg, "laneway_inbound_forwarded_total", map[string]string{"source": "std"}, 1)
		if n := seriesCount(t, reg, "laneway_inbound_verify_delay_seconds"); n != 4 {
			t.Errorf("%d verify delay series, want 4", n)
		}
	})
}

func seriesCount(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() == name {
			return len(fam.GetMetric())
		}
	}
	return 0
}

func wantCounter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string, want float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	metric:
		for _, m := range fam.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metric
				}
			}
			if got := m.GetCounter().GetValue(); got != want {
				t.Errorf("%s%v = %v, want %v", name, labels, got, want)
			}
			return
		}
	}
	t.Errorf("%s%v not found", name, labels)
}

// TestDoorRefusals covers 404, 400 (before the body is read) and 413, and
// that refused requests are kept and listed as rejected with their reason.
func TestDoorRefusals(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	reg := prometheus.NewRegistry()
	s := f.service(func(c *Config) { c.Registerer = reg }, nil)
	c := server(t, s)
	c.createSource(map[string]any{"id": "small", "kind": "stripe", "tenant": "acme", "secret": "whsec_s", "max_body_bytes": 64})

	body := stripeBody(1)
	if code, _ := c.raw(http.MethodPost, "/in/nope", body, stripeHeaders("whsec_s", time.Now(), body)); code != http.StatusNotFound {
		t.Errorf("unknown source: %d", code)
	}
	if code, _ := c.raw(http.MethodPost, "/in/small", []byte(`{}`), http.Header{"Content-Type": {"application/json"}}); code != http.StatusBadRequest {
		t.Errorf("missing signature: %d", code)
	}
	large := bytes.Repeat([]byte("x"), 10_000)
	if code, _ := c.raw(http.MethodPost, "/in/small", large, stripeHeaders("whsec_s", time.Now(), large)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("too large: %d", code)
	}
	waitVerifier(t, s, "2 refusals recorded", atLeast(StatusRejected, 2))
	reasons := countBy(c.list("source=small&status=rejected"), func(it Item) string { return it.Reason })
	if reasons[ReasonMissingSignature] != 1 || reasons[ReasonTooLarge] != 1 {
		t.Fatalf("rejected reasons %v", reasons)
	}
	items := c.list("source=small")
	for _, it := range items {
		// What was read before the limit (at most 4 KiB) is kept.
		if it.Reason == ReasonTooLarge && (it.BodyBytes != 64 || !strings.Contains(it.Detail, "64 bytes")) {
			t.Errorf("too-large item %+v: want the first 64 bytes kept and the limit named", it)
		}
	}
	if n := seriesCount(t, reg, "laneway_inbound_ack_duration_seconds"); n != 3 {
		t.Errorf("%d ACK series, want 3 (404 under %q, 400, 413)", n, unknownSourceLabel)
	}
}

// TestCrashBetweenAckAndVerification: one Service captures and is stopped
// before any verification (CaptureOnly: its verify stage never runs), a new
// Service on the same Kafka and Redis verifies and forwards every request
// exactly once.
func TestCrashBetweenAckAndVerification(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		f := newFixture(t, b)
		first := f.service(func(c *Config) { c.CaptureOnly = true }, nil)
		c := server(t, first)
		c.createSource(map[string]any{"id": "stripe", "kind": "stripe", "tenant": "acme", "secret": "whsec_k"})
		const n = 25
		ids := map[string]bool{}
		for i := range n {
			body := stripeBody(i)
			ids[c.capture("stripe", body, stripeHeaders("whsec_k", time.Now(), body))] = true
		}
		if pending := c.list("status=pending"); len(pending) != n {
			t.Fatalf("%d pending before the crash, want %d", len(pending), n)
		}
		testenv.Stop(t, first.Stop)

		second := f.service(nil, nil)
		c2 := server(t, second)
		waitVerifier(t, second, "every captured request verified", atLeast(StatusVerified, n))
		recs := f.envelopes(t)
		envs := parseEnvelopes(t, recs)
		perID := countBy(envs, func(e event.Envelope) string { return e.ID })
		if len(envs) != n || len(perID) != n {
			t.Fatalf("%d envelopes with %d distinct ids, want %d each once", len(envs), len(perID), n)
		}
		listed := c2.list("status=verified")
		if len(listed) != n {
			t.Fatalf("%d verified listed, want %d", len(listed), n)
		}
		for _, it := range listed {
			if !ids[it.ID] {
				t.Errorf("listed %s was not captured", it.ID)
			}
		}
		if p := c2.list("status=pending"); len(p) != 0 {
			t.Errorf("%d still pending", len(p))
		}
	})
}

// TestAbortedVerificationIsRedone: the first verify transaction aborts
// after its dedup claims were made (a crash before the commit); the
// requests are verified again, find their own claims and are forwarded,
// once, not called duplicates of themselves.
func TestAbortedVerificationIsRedone(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		f := newFixture(t, b)
		var aborts atomic.Int32
		s := f.service(nil, func(s *Service) {
			s.verifier.beforeEnd = func() error {
				if aborts.Add(1) == 1 {
					return errors.New("crash before commit")
				}
				return nil
			}
		})
		c := server(t, s)
		c.createSource(map[string]any{"id": "stripe", "kind": "stripe", "tenant": "acme", "secret": "whsec_k"})
		body := stripeBody(7)
		id := c.capture("stripe", body, stripeHeaders("whsec_k", time.Now(), body))
		waitVerifier(t, s, "the request verified after the abort", atLeast(StatusVerified, 1))
		if aborts.Load() < 2 {
			t.Fatalf("the hook ran %d times: no abort happened", aborts.Load())
		}
		if envs := f.envelopes(t); len(envs) != 1 {
			t.Fatalf("%d envelopes, want 1", len(envs))
		}
		items := c.list("source=stripe")
		if len(items) != 1 || items[0].ID != id || items[0].Status != StatusVerified {
			t.Fatalf("listing %+v", items)
		}
	})
}

// TestRedisDownForwardsEverything: without Redis, a provider retry is
// forwarded again (a duplicate with the same event id), never lost.
func TestRedisDownForwardsEverything(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	s := f.service(func(c *Config) { c.Redis = dead }, nil)
	c := server(t, s)
	c.createSource(map[string]any{"id": "stripe", "kind": "stripe", "tenant": "acme", "secret": "whsec_k"})
	body := stripeBody(3)
	c.capture("stripe", body, stripeHeaders("whsec_k", time.Now(), body))
	c.capture("stripe", body, stripeHeaders("whsec_k", time.Now(), body))
	waitVerifier(t, s, "both forwarded", atLeast(StatusVerified, 2))
	envs := parseEnvelopes(t, f.envelopes(t))
	if len(envs) != 2 || envs[0].ID != envs[1].ID {
		t.Fatalf("envelopes %+v: want two with the same event id", envs)
	}
	var m dto.Metric
	if err := s.metrics.dedupErrors.Write(&m); err != nil || m.GetCounter().GetValue() == 0 {
		t.Error("dedup errors not counted")
	}
}

// TestReplayReverifyAndRepublish: authentic requests rejected under a
// wrong mapping are re-verified after the fix (by time range and status),
// then one is re-published by id; the body bytes survive both. (Requests
// under a wrong secret are refused at the door with 401 and kept as
// metadata only: the provider retries them, see TestWrongSecretIsRefused.)
func TestReplayReverifyAndRepublish(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		f := newFixture(t, b)
		s := f.service(nil, nil)
		c := server(t, s)
		c.createSource(map[string]any{"id": "stripe", "kind": "stripe", "tenant": "acme", "secret": "whsec_right", "type_field": "kind"})
		since := time.Now().Add(-time.Second)
		var ids []string
		for i := range 3 {
			body := stripeBody(i)
			ids = append(ids, c.capture("stripe", body, stripeHeaders("whsec_right", time.Now(), body)))
		}
		waitVerifier(t, s, "3 rejections", atLeast(StatusRejected, 3))
		if envs := f.envelopes(t); len(envs) != 0 {
			t.Fatalf("%d envelopes from unmapped requests", len(envs))
		}
		// The mapping was wrong: fix it.
		c.json(http.MethodPatch, "/v1/inbound/sources/stripe", map[string]string{"type_field": "type"}, http.StatusOK, nil)

		var job ReplayJob
		c.json(http.MethodPost, "/v1/inbound/replays", map[string]any{
			"action": "reverify", "source": "stripe", "status": "rejected", "since": since,
		}, http.StatusAccepted, &job)
		job = waitJob(t, s, c, job.ID)
		if job.Replayed != 3 || job.Matched != 3 {
			t.Fatalf("reverify job %+v", job)
		}
		waitVerifier(t, s, "3 re-verified", atLeast(StatusVerified, 3))
		envs := parseEnvelopes(t, f.envelopes(t))
		if len(envs) != 3 {
			t.Fatalf("%d envelopes after reverify, want 3", len(envs))
		}
		byEntity := map[string]event.Envelope{}
		for _, e := range envs {
			byEntity[e.Entity] = e
		}
		if e := byEntity["in_1"]; !bytes.Equal(bytes.TrimSpace(e.Data), bytes.TrimSpace(stripeBody(1))) {
			t.Fatalf("replayed data %q is not the captured body", e.Data)
		}
		replayed := c.list("job=" + job.ID)
		if len(replayed) != 3 {
			t.Fatalf("listed %d outcomes of the job", len(replayed))
		}
		for _, it := range replayed {
			if it.Status != StatusVerified || it.Action != ActionReverify || !strings.HasPrefix(it.ReplayOf, "in_") {
				t.Errorf("replayed item %+v", it)
			}
		}
		// The same request again is the same job, already done: 200.
		var again ReplayJob
		c.json(http.MethodPost, "/v1/inbound/replays", map[string]any{
			"action": "reverify", "source": "stripe", "status": "rejected", "since": since,
		}, http.StatusOK, &again)
		if again.ID != job.ID || again.Status != jobs.StatusDone {
			t.Fatalf("repeat %+v", again)
		}

		// Re-verifying a forwarded request finds it forwarded: a duplicate.
		c.json(http.MethodPost, "/v1/inbound/replays", map[string]any{"action": "reverify", "ids": []string{replayed[0].ID}},
			http.StatusAccepted, &job)
		waitJob(t, s, c, job.ID)
		waitVerifier(t, s, "the duplicate", atLeast(StatusDuplicate, 1))
		// Republishing forwards again, with the same event id.
		c.json(http.MethodPost, "/v1/inbound/replays", map[string]any{"action": "republish", "ids": []string{ids[1]}},
			http.StatusAccepted, &job)
		job = waitJob(t, s, c, job.ID)
		if job.Replayed != 1 {
			t.Fatalf("republish job %+v", job)
		}
		waitVerifier(t, s, "the republish", atLeast(StatusVerified, 4))
		envs = parseEnvelopes(t, f.envelopes(t))
		perID := countBy(envs, func(e event.Envelope) string { return e.ID })
		if len(envs) != 4 || perID[byEntity["in_1"].ID] != 2 {
			t.Fatalf("after republish: %d envelopes, per id %v", len(envs), perID)
		}

		// Refusals.
		for _, bad := range []map[string]any{
			{"action": "reverify"},
			{"action": "explode", "ids": []string{ids[0]}},
			{"action": "reverify", "ids": []string{"evt_1"}},
			{"action": "reverify", "since": since, "status": "pending"},
		} {
			var refusal map[string]any
			c.json(http.MethodPost, "/v1/inbound/replays", bad, http.StatusBadRequest, &refusal)
			// As a refused redrive: the bare cause in reason.
			msg, _ := refusal["error"].(string)
			reason, _ := refusal["reason"].(string)
			if reason == "" || msg != "invalid replay request: "+reason || len(refusal) != 2 {
				t.Errorf("%v: refusal %v", bad, refusal)
			}
		}
		c.json(http.MethodPost, "/v1/inbound/replays", map[string]any{"action": "reverify", "since": since, "source": "nope"}, http.StatusNotFound, nil)
	})
}

func waitJob(t *testing.T, s *Service, c *client, id string) ReplayJob {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		changed := s.replays.Watch()
		var job ReplayJob
		c.json(http.MethodGet, "/v1/inbound/replays/"+id, nil, http.StatusOK, &job)
		switch job.Status {
		case jobs.StatusDone:
			return job
		case jobs.StatusFailed:
			t.Fatalf("replay %s failed: %s", id, job.Error)
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("replay %s still %s", id, job.Status)
		}
	}
}

// TestSourceAdmin covers the source routes: validation, conflicts, PATCH,
// secrets only where asked for, delete.
func TestSourceAdmin(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	s := f.service(nil, nil)
	c := server(t, s)
	c.json(http.MethodPost, "/v1/inbound/sources", map[string]any{"id": "s", "kind": "stripe", "tenant": "acme"}, http.StatusBadRequest, nil)
	c.json(http.MethodPost, "/v1/inbound/sources", map[string]any{"id": "s", "kind": "nope", "tenant": "acme", "secret": "x"}, http.StatusBadRequest, nil)
	c.json(http.MethodPost, "/v1/inbound/sources", map[string]any{"id": "s", "kind": "github", "tenant": "acme", "typo": 1}, http.StatusBadRequest, nil)
	created := c.createSource(map[string]any{"id": "s", "kind": "github", "tenant": "acme", "type_prefix": ""})
	if created.TypePrefix != "" || created.Secret == "" {
		t.Fatalf("created %+v", created)
	}
	c.json(http.MethodPost, "/v1/inbound/sources", map[string]any{"id": "s", "kind": "github", "tenant": "acme"}, http.StatusConflict, nil)

	var patched sourceJSON
	c.json(http.MethodPatch, "/v1/inbound/sources/s", map[string]any{"tenant": "beta", "max_body_bytes": 2048, "type_map": map[string]string{"push": "code.pushed"}},
		http.StatusOK, &patched)
	if patched.Tenant != "beta" || patched.MaxBodyBytes != 2048 || patched.TypeMap["push"] != "code.pushed" || patched.Secret != "" {
		t.Fatalf("patched %+v", patched)
	}
	c.json(http.MethodPatch, "/v1/inbound/sources/s", map[string]any{"kind": "stripe"}, http.StatusBadRequest, nil)
	c.json(http.MethodPatch, "/v1/inbound/sources/s", map[string]any{"tolerance_seconds": 0}, http.StatusBadRequest, nil)
	c.json(http.MethodPatch, "/v1/inbound/sources/none", map[string]any{"tenant": "x"}, http.StatusNotFound, nil)

	var rotated, revealed secretsJSON
	c.json(http.MethodPost, "/v1/inbound/sources/s/secret/rotate", nil, http.StatusOK, &rotated)
	if rotated.PreviousSecret != created.Secret || rotated.Secret == created.Secret || rotated.Secret == "" {
		t.Fatalf("rotated %+v", rotated)
	}
	c.json(http.MethodGet, "/v1/inbound/sources/s/secret", nil, http.StatusOK, &revealed)
	if revealed != rotated {
		t.Fatalf("revealed %+v, want %+v", revealed, rotated)
	}
	// Stripe secrets come from Stripe: a rotation must name one.
	c.createSource(map[string]any{"id": "st", "kind": "stripe", "tenant": "acme", "secret": "whsec_1"})
	c.json(http.MethodPost, "/v1/inbound/sources/st/secret/rotate", nil, http.StatusBadRequest, nil)

	var list struct{ Data []sourceJSON }
	c.json(http.MethodGet, "/v1/inbound/sources", nil, http.StatusOK, &list)
	if len(list.Data) != 2 || list.Data[0].Secret != "" || !list.Data[0].HasPreviousSecret {
		t.Fatalf("list %+v", list)
	}
	c.json(http.MethodDelete, "/v1/inbound/sources/s", nil, http.StatusNoContent, nil)
	c.json(http.MethodGet, "/v1/inbound/sources/s", nil, http.StatusNotFound, nil)
	c.json(http.MethodDelete, "/v1/inbound/sources/s", nil, http.StatusNotFound, nil)

	// A second Service reads the same config from the topic.
	other := f.service(func(c *Config) { c.CaptureOnly = true }, nil)
	if src, ok := other.Sources().Get("st"); !ok || src.Secret != "whsec_1" {
		t.Fatalf("second instance sees %+v %v", src, ok)
	}
	if _, ok := other.Sources().Get("s"); ok {
		t.Fatal("deleted source still visible")
	}
}

// TestRoutesThroughTheAPI mounts the routes on the real API server: the
// capture route is public, the admin routes need the token.
func TestRoutesThroughTheAPI(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	s := f.service(nil, nil)
	srv, err := api.New(api.Config{
		Endpoints: noEndpoints{}, Publisher: noPublisher{}, AdminToken: "tok", Routes: s.Routes(), Logger: testenv.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	anon := &client{t: t, base: hs.URL}
	admin := &client{t: t, base: hs.URL, token: "tok"}
	anon.json(http.MethodGet, "/v1/inbound/sources", nil, http.StatusUnauthorized, nil)
	admin.createSource(map[string]any{"id": "stripe", "kind": "stripe", "tenant": "acme", "secret": "whsec_k"})
	body := stripeBody(1)
	anon.capture("stripe", body, stripeHeaders("whsec_k", time.Now(), body))
	waitVerifier(t, s, "verified", atLeast(StatusVerified, 1))
	if items := admin.list("source=stripe"); len(items) != 1 {
		t.Fatalf("listed %+v", items)
	}
	if code, _ := anon.raw(http.MethodGet, "/in/stripe", nil, nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /in/stripe: %d", code)
	}
}

type noEndpoints struct{}

func (noEndpoints) Get(string) (endpoint.Endpoint, bool)                          { return endpoint.Endpoint{}, false }
func (noEndpoints) List() []endpoint.Endpoint                                     { return nil }
func (noEndpoints) Put(context.Context, endpoint.Endpoint) error                  { return errors.New("read only") }
func (noEndpoints) Delete(context.Context, string) error                          { return errors.New("read only") }
func (noEndpoints) String() string                                                { return "none" }
func (noPublisher) Publish(context.Context, event.Envelope) (int32, int64, error) { return 0, 0, nil }

type noPublisher struct{}

// TestBodyOverTheTopicLimitIs413: a body within the source's limit but
// over the inbound topic's max.message.bytes is refused with 413 and kept
// (first 4 KiB) as rejected, too_large, rather than answered 503 forever.
func TestBodyOverTheTopicLimitIs413(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	s := f.service(nil, nil)
	c := server(t, s)
	c.createSource(map[string]any{"id": "big", "kind": "github", "tenant": "acme", "secret": "k", "max_body_bytes": 4 << 20})
	body := bytes.Repeat([]byte("y"), 2<<20) // kfake's default max.message.bytes is 1 MiB
	code, resp := c.raw(http.MethodPost, "/in/big", body, githubHeaders("k", "d-big", "push", body))
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MiB body: %d %s", code, resp)
	}
	small := []byte(`{"repository":{"full_name":"a/b"}}`)
	c.capture("big", small, githubHeaders("k", "d-small", "push", small))
	waitVerifier(t, s, "both decided", decidedAtLeast(2))
	reasons := countBy(c.list("source=big"), func(it Item) string { return it.Status + "/" + it.Reason })
	if reasons["rejected/"+ReasonTooLarge] != 1 || reasons["verified/"] != 1 {
		t.Fatalf("outcomes %v", reasons)
	}
}
