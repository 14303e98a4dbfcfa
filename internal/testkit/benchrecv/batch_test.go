package benchrecv_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/testkit/benchrecv"
)

// startBatch starts a batch receiver of one endpoint, Laneway's "ep",
// whose events lookup knows and whose warm-up events' ids start with "w".
func startBatch(t *testing.T, verify bool) *benchrecv.BatchReceiver {
	t.Helper()
	br, err := benchrecv.StartBatch(benchrecv.BatchConfig{Endpoints: 1, Slots: 10, Lookup: lookup, WarmupPrefix: "w", Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(br.Close)
	if err := br.SetEndpoint(0, "ep", secret); err != nil {
		t.Fatal(err)
	}
	return br
}

// item is an event of a batch, as the receiver reads it.
type item struct {
	Sequence int64  `json:"sequence"`
	ID       string `json:"id"`
}

// batch is the body and the webhook-id Laneway gives a batch of items.
func batch(items ...item) (body, msgID string) {
	b, _ := json.Marshal(map[string][]item{"batch": items})
	return string(b), fmt.Sprintf("batch_ep_%d_%d", items[0].Sequence, items[len(items)-1].Sequence)
}

// postBatch posts items as one batch, signed.
func postBatch(t *testing.T, br *benchrecv.BatchReceiver, items ...item) int {
	t.Helper()
	body, msgID := batch(items...)
	return post(t, br.URL(0), msgID, sign(t, msgID, body), body)
}

// TestBatchTally: a skipped sequence, a step back, an entity's revision
// not above its last, an event received twice and an unknown one are each
// counted; a warm-up event takes its place in the sequence only.
func TestBatchTally(t *testing.T) {
	br := startBatch(t, false)
	// s0, s1, s2, s3 are entities 0, 1, 0, 1 at revisions 1, 1, 2, 2; 5 skips 4.
	if code := postBatch(t, br, item{1, "w0"}, item{2, "s0"}, item{3, "s1"}, item{5, "s2"}); code != http.StatusNoContent {
		t.Fatalf("status %d", code)
	}
	// 6 again steps back, and is s0 again: its entity back at revision 1.
	postBatch(t, br, item{6, "s3"}, item{6, "s0"}, item{7, "x"})
	want := benchrecv.BatchStats{Batches: 2, Largest: 4, Gaps: 2, Order: 1, Duplicates: 1, Unmatched: 1}
	if got := br.Stats(); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	if br.Received() != 4 || br.Warmed() != 1 || br.Requests() != 2 || br.ReceivedAt(3) == 0 || br.ReceivedAt(4) != 0 {
		t.Fatalf("received %d, warmed %d, requests %d, slot 3 at %d, slot 4 at %d",
			br.Received(), br.Warmed(), br.Requests(), br.ReceivedAt(3), br.ReceivedAt(4))
	}
}

// TestBatchRefuses: an empty batch, a webhook-id that does not name the
// batch's endpoint and sequences and, with Verify, a bad signature are
// answered 400 and counted, their events not received.
func TestBatchRefuses(t *testing.T) {
	br := startBatch(t, true)
	body, msgID := batch(item{1, "s0"})
	for _, tc := range []struct {
		name, msgID, body string
		signed            bool
	}{
		{"unsigned", msgID, body, false},
		{"tampered", msgID, body, true},
		{"another endpoint's", "batch_other_1_1", body, true},
		{"other sequences", "batch_ep_1_2", body, true},
		{"empty", "batch_ep_1_1", `{"batch":[]}`, true},
	} {
		h := http.Header{}
		if tc.signed {
			h = sign(t, tc.msgID, tc.body)
		}
		if tc.name == "tampered" {
			tc.body += " "
		}
		if code := post(t, br.URL(0), tc.msgID, h, tc.body); code != http.StatusBadRequest {
			t.Errorf("%s batch: status %d, want 400", tc.name, code)
		}
	}
	if got := br.Stats(); got != (benchrecv.BatchStats{Bad: 5}) || br.Received() != 0 {
		t.Fatalf("stats %+v, received %d", got, br.Received())
	}
	if code := postBatch(t, br, item{1, "s0"}); code != http.StatusNoContent || br.Received() != 1 {
		t.Fatalf("signed batch: status %d, received %d", code, br.Received())
	}
}

// TestBatchOverlap: a batch that arrives while another of its endpoint is
// in flight is counted.
func TestBatchOverlap(t *testing.T) {
	br := startBatch(t, false)
	body, msgID := batch(item{1, "s0"})
	// With Expect: 100-continue the client sends the body only once the
	// handler reads it: when the first write returns, the batch is in
	// flight.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, br.URL(0), pr)
	req.ContentLength = int64(len(body)) // no probe of the body before the 100
	req.Header.Set("Expect", "100-continue")
	req.Header.Set("webhook-id", msgID)
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	done := make(chan int)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	if _, err := io.WriteString(pw, body[:1]); err != nil {
		t.Fatal(err)
	}
	postBatch(t, br, item{2, "s1"})
	_, _ = io.Copy(pw, strings.NewReader(body[1:]))
	pw.Close()
	if code := <-done; code != http.StatusNoContent {
		t.Fatalf("first batch: status %d", code)
	}
	if got := br.Stats(); got.Overlaps != 1 || got.Batches != 2 {
		t.Fatalf("stats %+v, want 1 overlap in 2 batches", got)
	}
}
