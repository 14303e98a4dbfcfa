package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/laneway/laneway/internal/testkit/ordercheck"
)

// TestReceiverLogsEveryRequest: a held request answered 503 is in the
// request log (not the receipt log) with its hold, a 2xx one in both, and
// two requests of one entity at once show as an overlap to the checker.
func TestReceiverLogsEveryRequest(t *testing.T) {
	dir := t.TempDir()
	r, err := NewReceivers(filepath.Join(dir, "receipts.ndjson"), filepath.Join(dir, "requests.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ep, url, err := r.Add("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	if err := ep.SetEndpoint("ep1", secret); err != nil {
		t.Fatal(err)
	}
	signer, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	send := func(id, entity string, rev int64) int {
		body, _ := json.Marshal(map[string]any{"id": id, "type": "t", "entity": map[string]any{"id": entity, "revision": rev}})
		now := time.Now()
		sig, err := signer.Sign(id, now, body)
		if err != nil {
			t.Error(err)
			return 0
		}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", formatUnix(now))
		req.Header.Set("webhook-signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	const hold = time.Second
	ep.SetHold(Mode503, hold)
	var wg sync.WaitGroup
	var held int
	wg.Go(func() { held = send("e1", "o1", 1) })
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for ep.InFlight() != 1 {
		select {
		case <-deadline.C:
			t.Fatal("the held request never showed in flight")
		case <-poll.C:
		}
	}
	if got := ep.RunningEntities(); len(got) != 1 || got[0] != "o1" {
		t.Errorf("running entities %v", got)
	}
	ep.SetMode(ModeOK)                                           // the held request keeps its 503
	if got := send("e2", "o1", 2); got != http.StatusNoContent { // arrives while e1 is held: an overlap
		t.Errorf("second request answered %d", got)
	}
	wg.Wait()
	if held != http.StatusServiceUnavailable {
		t.Errorf("held request answered %d, want 503", held)
	}

	reqs := r.RequestsOf("ep1")
	if len(reqs) != 2 {
		t.Fatalf("%d requests logged, want 2: %+v", len(reqs), reqs)
	}
	var first ordercheck.Receipt
	for _, rq := range reqs {
		if rq.EventID == "e1" {
			first = rq
		}
	}
	if first.Status != http.StatusServiceUnavailable || first.Done.Sub(first.At) < hold {
		t.Errorf("held request logged as %+v", first)
	}
	if rc := r.Receipts(); len(rc) != 1 || rc[0].EventID != "e2" {
		t.Errorf("receipts %+v, want e2 only", rc)
	}
	if s := r.Stats(); s.Requests != 2 || s.Failed != 1 || s.Overlaps != 1 || s.BadSignatures != 0 {
		t.Errorf("stats %+v", s)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	logged, err := ordercheck.ReadFile[ordercheck.Receipt](filepath.Join(dir, "requests.ndjson"))
	if err != nil || len(logged) != 2 {
		t.Fatalf("request log: %d records, %v", len(logged), err)
	}
	rep := ordercheck.Check(ordercheck.Input{
		Endpoints: []ordercheck.Endpoint{{ID: "ep1", Tenant: "t0"}},
		Accepted: []ordercheck.Accepted{{ID: "e1", Tenant: "t0", Entity: "o1", Revision: 1, Coalesce: true, Offset: 1},
			{ID: "e2", Tenant: "t0", Entity: "o1", Revision: 2, Coalesce: true, Offset: 2}},
		Receipts: r.Receipts(), Requests: logged,
	})
	if rep.Overlaps != 1 || rep.Lost != 0 || rep.Pass() {
		t.Errorf("check: %s", rep.String())
	}
}

func formatUnix(t time.Time) string {
	b, _ := json.Marshal(t.Unix())
	return string(b)
}
