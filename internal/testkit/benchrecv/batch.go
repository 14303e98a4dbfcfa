package benchrecv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/laneway/laneway/internal/plumbing/stdverify"
)

// BatchConfig configures a BatchReceiver.
type BatchConfig struct {
	// Endpoints is how many batch endpoints the receiver plays, numbered
	// from 0, each on a port of its own.
	Endpoints int
	// Slots is the number of expected events.
	Slots int
	// Lookup maps the id of an event in a batch to endpoint n to the event
	// it must be. Events it does not know are counted as unmatched.
	Lookup func(endpoint int, eventID string) (Delivery, bool)
	// WarmupPrefix, when set, marks warm-up events by their id's prefix:
	// they take their place in the sequence and count in Warmed, but are
	// not looked up.
	WarmupPrefix string
	// Verify checks every batch's signature with the official Standard
	// Webhooks library (the secret from SetEndpoint).
	Verify bool
}

// BatchStats is what a BatchReceiver found, over every endpoint.
type BatchStats struct {
	Batches int `json:"batches"`
	Largest int `json:"largest_batch"`
	// Gaps counts events whose sequence was not the one after the
	// previous event's (a skip or a step back); Order those at or below
	// their entity's last revision; Duplicates those received before.
	Gaps       int64 `json:"sequence_gaps"`
	Order      int64 `json:"order_violations"`
	Duplicates int64 `json:"duplicates"`
	Unmatched  int64 `json:"unmatched"`
	// Bad counts requests refused: unreadable, or a webhook-id other than
	// batch_<endpoint>_<first>_<last> (or, with Verify, a bad signature).
	Bad int64 `json:"bad_requests"`
	// Overlaps counts requests that arrived while another batch of their
	// endpoint was in flight.
	Overlaps int64 `json:"overlaps"`
}

// BatchReceiver receives batch endpoints' batches, one port each, and
// checks every batch as it comes: the sequence of each event follows the
// previous one's (one order for the endpoint, no crash to repeat
// anything), each entity's revisions rise, nothing arrives twice, and
// never two batches of one endpoint are in flight at once. It answers 204,
// or 400 to a batch it refuses.
type BatchReceiver struct {
	cfg BatchConfig
	ports
	receipts
	endpoints []*batchEndpoint

	requests, warmed atomic.Int64
}

// batchEndpoint is one batch endpoint's record.
type batchEndpoint struct {
	id string // set by SetEndpoint before any event is published
	stdverify.Verifier
	inFlight atomic.Int64

	mu   sync.Mutex
	next int64         // the sequence due next
	last map[int]int64 // entity → highest revision received
	BatchStats
}

// batchItem is what the receiver reads of an event of a batch.
type batchItem struct {
	Sequence int64  `json:"sequence"`
	ID       string `json:"id"`
}

// StartBatch listens on loopback and serves until Close.
func StartBatch(cfg BatchConfig) (*BatchReceiver, error) {
	if cfg.Endpoints <= 0 || cfg.Slots < 0 || cfg.Lookup == nil {
		return nil, errors.New("benchrecv: Endpoints > 0, Slots >= 0 and Lookup are required")
	}
	br := &BatchReceiver{cfg: cfg, receipts: receipts{at: make([]atomic.Int64, cfg.Slots)}}
	for range cfg.Endpoints {
		br.endpoints = append(br.endpoints, &batchEndpoint{next: 1, last: map[int]int64{}})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /b/{n}", br.serve)
	if err := br.listen(cfg.Endpoints, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}); err != nil {
		return nil, err
	}
	return br, nil
}

// Close stops serving, drops open connections and waits for the servers to return.
func (br *BatchReceiver) Close() { br.close() }

// URL is batch endpoint n's URL: a port of its own, as a real endpoint
// has a host of its own.
func (br *BatchReceiver) URL(n int) string { return br.url("/b/", n) }

// SetEndpoint sets batch endpoint n's Laneway id, which its webhook-ids
// name, and the secret its batches are signed with.
func (br *BatchReceiver) SetEndpoint(n int, id, secret string) error {
	br.endpoints[n].id = id
	return br.endpoints[n].SetSecret(secret)
}

// Requests is the number of batches received, refused ones included.
func (br *BatchReceiver) Requests() int64 { return br.requests.Load() }

// Warmed is the number of warm-up events received.
func (br *BatchReceiver) Warmed() int64 { return br.warmed.Load() }

// serve takes one batch.
func (br *BatchReceiver) serve(w http.ResponseWriter, req *http.Request) {
	var n int
	if _, err := fmt.Sscan(req.PathValue("n"), &n); err != nil || n < 0 || n >= len(br.endpoints) {
		http.NotFound(w, req)
		return
	}
	ep := br.endpoints[n]
	if ep.inFlight.Add(1) > 1 {
		ep.count(&ep.Overlaps)
	}
	defer ep.inFlight.Add(-1)
	br.requests.Add(1)
	items, err := br.read(ep, req)
	if err != nil {
		ep.count(&ep.Bad)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	br.tally(n, ep, items, time.Now().UnixNano())
	w.WriteHeader(http.StatusNoContent)
}

// count adds one to a counter of ep's.
func (ep *batchEndpoint) count(c *int64) {
	ep.mu.Lock()
	*c++
	ep.mu.Unlock()
}

// read reads and checks a batch: its body, its webhook-id and, with
// Verify, its signature.
func (br *BatchReceiver) read(ep *batchEndpoint, req *http.Request) ([]batchItem, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	if br.cfg.Verify && !ep.Valid(body, req.Header) {
		return nil, errors.New("a bad signature")
	}
	var b struct {
		Batch []batchItem `json:"batch"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	if len(b.Batch) == 0 {
		return nil, errors.New("an empty batch")
	}
	want := fmt.Sprintf("batch_%s_%d_%d", ep.id, b.Batch[0].Sequence, b.Batch[len(b.Batch)-1].Sequence)
	if req.Header.Get("webhook-id") != want {
		return nil, fmt.Errorf("webhook-id %q, want %q", req.Header.Get("webhook-id"), want)
	}
	return b.Batch, nil
}

// tally records batch endpoint n's batch, received at (Unix ns).
func (br *BatchReceiver) tally(n int, ep *batchEndpoint, items []batchItem, at int64) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.Batches++
	ep.Largest = max(ep.Largest, len(items))
	for _, it := range items {
		if it.Sequence != ep.next {
			ep.Gaps++
		}
		ep.next = it.Sequence + 1
		if br.cfg.WarmupPrefix != "" && strings.HasPrefix(it.ID, br.cfg.WarmupPrefix) {
			br.warmed.Add(1)
			continue
		}
		d, ok := br.cfg.Lookup(n, it.ID)
		if !ok {
			ep.Unmatched++
			continue
		}
		if d.Revision <= ep.last[d.Entity] {
			ep.Order++
		}
		ep.last[d.Entity] = max(ep.last[d.Entity], d.Revision)
		if !br.firstReceipt(d.Slot, at) {
			ep.Duplicates++
		}
	}
}

// Stats sums the endpoints' records.
func (br *BatchReceiver) Stats() BatchStats {
	var s BatchStats
	for _, ep := range br.endpoints {
		ep.mu.Lock()
		s.Batches += ep.Batches
		s.Largest = max(s.Largest, ep.Largest)
		s.Gaps, s.Order, s.Duplicates = s.Gaps+ep.Gaps, s.Order+ep.Order, s.Duplicates+ep.Duplicates
		s.Unmatched, s.Bad, s.Overlaps = s.Unmatched+ep.Unmatched, s.Bad+ep.Bad, s.Overlaps+ep.Overlaps
		ep.mu.Unlock()
	}
	return s
}
