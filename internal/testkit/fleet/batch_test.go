package fleet

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/receiver"
	"github.com/laneway/laneway/signing"
)

const batchSecret = "whsec_c2VjcmV0LWtleS1vZi10aGUtdGVzdA=="

// sendBatch posts evs to br as one batch under webhook-id id, signed with
// secret, and returns the answer's status.
func sendBatch(t *testing.T, br *BatchReceiver, id, secret string, evs ...receiver.FeedEvent) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"batch": evs})
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	h, err := signing.Headers(id, time.Now(), body, []string{secret})
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, h)
	w := httptest.NewRecorder()
	br.ServeHTTP(w, req)
	return w.Code
}

func feedEvent(seq int64, id, entity string, rev int64) receiver.FeedEvent {
	return receiver.FeedEvent{Sequence: seq, ID: id, Entity: receiver.Entity{ID: entity, Revision: rev}}
}

// TestBatchReceiver makes sure the receiver refuses and counts what it
// must: a bad signature or webhook-id, a body above its limit, a request
// arriving while another is in flight; and tells a retry under the failed
// batch's webhook-id from one under another.
func TestBatchReceiver(t *testing.T) {
	br := NewBatchReceiver(BatchConfig{Limit: 400, Seed: 1})
	br.SetEndpoint("ep", batchSecret)
	send := func(id, secret string, evs ...receiver.FeedEvent) int { return sendBatch(t, br, id, secret, evs...) }
	a, b := feedEvent(1, "a", "x", 1), feedEvent(2, "b", "x", 2)
	big := feedEvent(3, strings.Repeat("c", 400), "x", 3)
	other := "whsec_b3RoZXIta2V5"
	br.cfg.FailRate = 1
	codes := []int{send("batch_ep_1_2", batchSecret, a, b)}
	br.cfg.FailRate = 0
	codes = append(codes, send("batch_ep_1_2", batchSecret, a, b), send("batch_ep_1_1", batchSecret, a, b), send("batch_ep_1_2", other, a, b),
		send("batch_ep_3_3", batchSecret, big))
	br.inFlight.Add(1) // another request in flight
	codes = append(codes, send("batch_ep_1_1", batchSecret, a))
	want := []int{http.StatusServiceUnavailable, http.StatusOK, http.StatusBadRequest, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusOK}
	st := br.Stats()
	if !slices.Equal(codes, want) || st.Bad != 2 || st.Overlaps != 1 || st.Retried != 1 || st.RetriedOther != 0 || st.Largest != 2 || len(br.Accepted()) != 2 {
		t.Fatalf("answers %v, want %v; stats %+v", codes, want, st)
	}
}

// TestBatchReceiverFailsFirstBatches makes sure the first Failures
// batches within the limit are answered 503 and the next accepted, that
// SetLimit moves the limit, and that every answer signals Changed.
func TestBatchReceiverFailsFirstBatches(t *testing.T) {
	br := NewBatchReceiver(BatchConfig{Limit: 100, Failures: 2})
	br.SetEndpoint("ep", batchSecret)
	big := feedEvent(1, strings.Repeat("c", 100), "x", 1)
	var codes []int
	for range 2 {
		codes = append(codes, sendBatch(t, br, "batch_ep_1_1", batchSecret, big))
	}
	br.SetLimit(1 << 20)
	for range 3 {
		codes = append(codes, sendBatch(t, br, "batch_ep_1_1", batchSecret, big))
	}
	want := []int{http.StatusRequestEntityTooLarge, http.StatusRequestEntityTooLarge,
		http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK}
	if st := br.Stats(); !slices.Equal(codes, want) || st.Failed != 2 || st.TooLarge != 2 || st.Accepted != 1 {
		t.Fatalf("answers %v, want %v; stats %+v", codes, want, st)
	}
	select {
	case <-br.Changed():
	default:
		t.Fatal("no change signalled")
	}
}
