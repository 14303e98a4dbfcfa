package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/laneway/laneway/receiver"
	"github.com/laneway/laneway/signing"
)

// BatchConfig is how a BatchReceiver answers.
type BatchConfig struct {
	Limit    int     // a body above Limit bytes is answered 413 (SetLimit changes it)
	Failures int     // the first Failures batches within the limit are answered 503
	FailRate float64 // then this share of the others, drawn from Seed
	// Hold is the most an accepted batch is held (for a time drawn from
	// Seed) before its 200: the time a receiver spends on a batch.
	Hold time.Duration
	Seed uint64
}

// BatchReceiver plays a batch endpoint's receiver: it verifies each
// batch's signature and its webhook-id (batch_<endpoint>_<first
// sequence>_<last sequence>), answers 413 to a body above the limit and
// 503 as BatchConfig says, and keeps the batches it accepted, in the
// order it accepted them, before answering 200 after up to Hold. It
// counts the requests that arrived while another was in flight: a batch
// endpoint has one batch out at a time. It is an http.Handler: the test
// serves it where it likes.
type BatchReceiver struct {
	endpoint atomic.Value // string: set with the secret
	secret   atomic.Value // string
	inFlight atomic.Int64
	holding  chan struct{} // a batch was accepted and is being held
	changed  chan struct{} // a request was answered

	mu       sync.Mutex
	cfg      BatchConfig
	rng      *rand.Rand
	accepted [][]receiver.FeedEvent
	failed   string // the webhook-id of the last batch answered 503, until the next request
	stats    BatchStats
}

// BatchStats counts a BatchReceiver's answers.
type BatchStats struct {
	Requests int `json:"requests"`
	Accepted int `json:"accepted"`  // answered 200
	Failed   int `json:"failed"`    // answered 503
	TooLarge int `json:"too_large"` // answered 413
	// Bad counts the requests that failed verification (signature, body or
	// webhook-id), answered 400; BadDetail says what the first one was.
	Bad       int    `json:"bad"`
	BadDetail string `json:"bad_detail,omitempty"`
	// Overlaps counts the requests that arrived while another was in flight.
	Overlaps int `json:"overlaps"`
	// Largest is the most events a verified request held, answered 200 or not.
	Largest int `json:"largest"`
	// Retried counts the batches that came after one answered 503 under
	// its webhook-id (a retry is the failed batch, whole); RetriedOther
	// those under another one (a new runner after a fault starts afresh).
	Retried      int `json:"retried"`
	RetriedOther int `json:"retried_other"`
}

// NewBatchReceiver returns a receiver that answers as cfg says. It
// verifies nothing until SetEndpoint: every request before is bad.
func NewBatchReceiver(cfg BatchConfig) *BatchReceiver {
	br := &BatchReceiver{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		holding: make(chan struct{}, 1), changed: make(chan struct{}, 1)}
	br.endpoint.Store("")
	br.secret.Store("")
	return br
}

// SetEndpoint sets the endpoint the receiver plays: its id and signing
// secret.
func (br *BatchReceiver) SetEndpoint(id, secret string) {
	br.endpoint.Store(id)
	br.secret.Store(secret)
}

// SetLimit changes the body size above which batches are answered 413.
func (br *BatchReceiver) SetLimit(n int) {
	br.mu.Lock()
	defer br.mu.Unlock()
	br.cfg.Limit = n
}

// ServeHTTP takes one batch.
func (br *BatchReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	overlap := br.inFlight.Add(1) > 1
	defer br.inFlight.Add(-1)
	defer signal(br.changed)
	body, err := io.ReadAll(req.Body)
	if err == nil {
		var batch []receiver.FeedEvent
		if batch, err = br.verify(req.Header, body); err == nil {
			status, hold := br.answer(req.Header.Get("webhook-id"), batch, len(body), overlap)
			if status == http.StatusOK {
				signal(br.holding)
			}
			time.Sleep(hold) // the receiver's work on the batch, not synchronisation
			w.WriteHeader(status)
			return
		}
	}
	br.mu.Lock()
	br.stats.Requests++
	br.stats.Bad++
	if br.stats.BadDetail == "" {
		br.stats.BadDetail = err.Error()
	}
	br.mu.Unlock()
	w.WriteHeader(http.StatusBadRequest)
}

// signal sends on a channel of one without waiting: a signal not taken
// yet stands for the later ones.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// verify checks the signature, the body and the webhook-id, and returns
// the batch's events.
func (br *BatchReceiver) verify(h http.Header, body []byte) ([]receiver.FeedEvent, error) {
	if err := signing.Verify(h, body, []string{br.secret.Load().(string)}, time.Minute, time.Now()); err != nil {
		return nil, err
	}
	var b struct {
		Batch []receiver.FeedEvent `json:"batch"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	if len(b.Batch) == 0 {
		return nil, errors.New("an empty batch")
	}
	want := fmt.Sprintf("batch_%s_%d_%d", br.endpoint.Load(), b.Batch[0].Sequence, b.Batch[len(b.Batch)-1].Sequence)
	if got := h.Get("webhook-id"); got != want {
		return nil, fmt.Errorf("webhook-id %q for a batch of sequences %d to %d (want %q)", got, b.Batch[0].Sequence, b.Batch[len(b.Batch)-1].Sequence, want)
	}
	return b.Batch, nil
}

// answer decides a verified batch's status and how long to hold it, and
// keeps it when it is accepted: a receiver stores a batch before its 2xx.
func (br *BatchReceiver) answer(id string, batch []receiver.FeedEvent, size int, overlap bool) (int, time.Duration) {
	br.mu.Lock()
	defer br.mu.Unlock()
	br.stats.Requests++
	br.stats.Largest = max(br.stats.Largest, len(batch))
	if overlap {
		br.stats.Overlaps++
	}
	switch failed := br.failed; {
	case failed == "":
	case failed == id:
		br.stats.Retried++
	default:
		br.stats.RetriedOther++
	}
	br.failed = ""
	switch {
	case size > br.cfg.Limit:
		br.stats.TooLarge++
		return http.StatusRequestEntityTooLarge, 0
	case br.stats.Failed < br.cfg.Failures, br.rng.Float64() < br.cfg.FailRate:
		br.stats.Failed++
		br.failed = id
		return http.StatusServiceUnavailable, 0
	}
	br.stats.Accepted++
	br.accepted = append(br.accepted, batch)
	return http.StatusOK, time.Duration(br.rng.Int64N(int64(br.cfg.Hold) + 1))
}

// Holding receives when a batch was accepted and is being held, its
// answer not sent yet (a signal may be left over from an earlier batch:
// take it first).
func (br *BatchReceiver) Holding() <-chan struct{} { return br.holding }

// Changed receives after a request was answered (a signal may stand for
// several), so that a test can wait on what the receiver saw.
func (br *BatchReceiver) Changed() <-chan struct{} { return br.changed }

// Accepted is every batch accepted so far, in order.
func (br *BatchReceiver) Accepted() [][]receiver.FeedEvent {
	br.mu.Lock()
	defer br.mu.Unlock()
	return slices.Clone(br.accepted)
}

// AcceptedIDs counts the distinct events accepted so far.
func (br *BatchReceiver) AcceptedIDs() int {
	br.mu.Lock()
	defer br.mu.Unlock()
	seen := map[string]bool{}
	for _, b := range br.accepted {
		for _, ev := range b {
			seen[ev.ID] = true
		}
	}
	return len(seen)
}

// Stats are the receiver's counters so far.
func (br *BatchReceiver) Stats() BatchStats {
	br.mu.Lock()
	defer br.mu.Unlock()
	return br.stats
}
