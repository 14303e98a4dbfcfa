package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/receiver"
	"github.com/laneway/laneway/signing"
)

// BatchReceiver plays a batch endpoint's receiver: it verifies each
// batch's signature and its webhook-id (batch_<endpoint>_<first
// sequence>_<last sequence>), answers 413 to a body above Limit bytes and
// 503 to a FailRate share of the others, and keeps the batches it
// accepted, in the order it accepted them, before answering 200 after up
// to Hold (the time a receiver spends on a batch). It counts the requests
// that arrived while another was in flight: a batch endpoint has one
// batch out at a time.
type BatchReceiver struct {
	Limit    int
	FailRate float64
	Hold     time.Duration

	endpoint atomic.Value // string: set with the secret
	secret   atomic.Value // string
	inFlight atomic.Int64
	holding  chan struct{} // a batch was accepted and is being held

	mu       sync.Mutex
	rng      *rand.Rand
	accepted [][]receiver.FeedEvent
	failed   string // the webhook-id of the last batch answered 503, until the next request
	stats    BatchReceiverStats
}

// BatchReceiverStats counts a BatchReceiver's answers.
type BatchReceiverStats struct {
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

// NewBatchReceiver returns a receiver whose 503s and holds follow seed.
func NewBatchReceiver(limit int, failRate float64, hold time.Duration, seed uint64) *BatchReceiver {
	br := &BatchReceiver{Limit: limit, FailRate: failRate, Hold: hold, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		holding: make(chan struct{}, 1)}
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

// ServeHTTP takes one batch.
func (br *BatchReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	overlap := br.inFlight.Add(1) > 1
	defer br.inFlight.Add(-1)
	body, err := io.ReadAll(req.Body)
	if err == nil {
		var batch []receiver.FeedEvent
		if batch, err = br.verify(req.Header, body); err == nil {
			status, hold := br.answer(req.Header.Get("webhook-id"), batch, len(body), overlap)
			if status == http.StatusOK {
				select {
				case br.holding <- struct{}{}:
				default:
				}
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
	case size > br.Limit:
		br.stats.TooLarge++
		return http.StatusRequestEntityTooLarge, 0
	case br.rng.Float64() < br.FailRate:
		br.stats.Failed++
		br.failed = id
		return http.StatusServiceUnavailable, 0
	}
	br.stats.Accepted++
	br.accepted = append(br.accepted, batch)
	return http.StatusOK, time.Duration(br.rng.Int64N(int64(br.Hold) + 1))
}

// Holding receives when a batch was accepted and is being held, its
// answer not sent yet (a signal may be left over from an earlier batch:
// take it first).
func (br *BatchReceiver) Holding() <-chan struct{} { return br.holding }

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
func (br *BatchReceiver) Stats() BatchReceiverStats {
	br.mu.Lock()
	defer br.mu.Unlock()
	return br.stats
}

// BatchReport is what CheckBatches found in what one batch endpoint's
// receiver accepted. Read counts the events accepted, duplicates included;
// Missing the published events neither accepted nor dead-lettered.
type BatchReport struct {
	FeedReport
	Batches  int
	Largest  int            // events in the largest batch
	Dead     map[string]int // distinct events dead-lettered, by reason
	Sequence int64          // the highest sequence accepted or dead-lettered
}

func (r BatchReport) String() string {
	return fmt.Sprintf("%d batches (largest %d events), sequences up to %d, dead letters %v; %s", r.Batches, r.Largest, r.Sequence, r.Dead, r.FeedReport)
}

// CheckBatches checks the batches a batch endpoint's receiver accepted, in
// the order it accepted them, and the endpoint's dead letters, against
// the facts published to its tenant: no batch above maxEvents; the
// sequence of each event accepted for the first time above every sequence
// accepted before it (one order for the whole endpoint; a batch sent
// again after a crash, or an event appended again, repeats ids accepted
// before, which is allowed); an entity's revisions rising likewise; every
// event accepted was published; every sequence up to the highest one
// either accepted or dead-lettered (no gap); and every unambiguous
// published event accepted or dead-lettered (nothing lost).
func CheckBatches(published []FeedPublished, batches [][]receiver.FeedEvent, dead []event.DeadLetter, maxEvents int) BatchReport {
	r := BatchReport{Batches: len(batches), Dead: map[string]int{}}
	problem := problemList(&r.Problems)
	byID, ambiguous := publishedByID(published)
	r.Ambiguous += ambiguous
	seen := map[string]bool{}
	newest := map[string]int64{}
	covered := map[int64]bool{}
	last := int64(0) // the highest sequence first accepted
	for i, b := range batches {
		r.Largest = max(r.Largest, len(b))
		if len(b) > maxEvents {
			problem("size", "batch %d holds %d events, above max_events %d", i, len(b), maxEvents)
		}
		for _, ev := range b {
			r.Read++
			covered[ev.Sequence] = true
			if p, ok := byID[ev.ID]; !ok || p.Entity != ev.Entity.ID || p.Revision != ev.Entity.Revision {
				problem("unknown", "%s (%s revision %d) at %d was not published so", ev.ID, ev.Entity.ID, ev.Entity.Revision, ev.Sequence)
			}
			if seen[ev.ID] {
				r.Duplicates++
				continue
			}
			if ev.Sequence <= last {
				problem("order", "%s at %d first accepted after sequence %d (batch %d)", ev.ID, ev.Sequence, last, i)
			}
			if ev.Entity.Revision <= newest[ev.Entity.ID] {
				problem("entity order", "%s revision %d first accepted after revision %d (batch %d)", ev.Entity.ID, ev.Entity.Revision, newest[ev.Entity.ID], i)
			}
			seen[ev.ID], last = true, max(last, ev.Sequence)
			newest[ev.Entity.ID] = max(newest[ev.Entity.ID], ev.Entity.Revision)
		}
	}
	done := r.addDead(dead, seen, covered, problem)
	r.gaps(covered, problem)
	missingFrom(&r.FeedReport, published, done, newest, problem)
	return r
}

// addDead counts the dead letters by reason, marks their sequences
// covered, and returns the ids accepted or dead-lettered. A letter of
// payload_too_large must keep its sequence (the runner sent it).
func (r *BatchReport) addDead(dead []event.DeadLetter, accepted map[string]bool, covered map[int64]bool, problem func(kind, format string, args ...any)) map[string]bool {
	done := maps.Clone(accepted)
	counted := map[string]bool{}
	for _, l := range dead {
		if l.Delivery == nil {
			problem("dead", "letter %s without its delivery", l.ID)
			continue
		}
		d := l.Delivery
		if d.Sequence > 0 {
			covered[d.Sequence] = true
		} else if l.Reason == event.ReasonTooLarge {
			problem("dead", "%s dead of %s without its sequence", d.EventID, l.Reason)
		}
		if !counted[d.EventID] {
			counted[d.EventID] = true
			r.Dead[l.Reason]++
		}
		done[d.EventID] = true
	}
	return done
}

// gaps reports the sequences up to the highest one covered that were
// neither accepted nor dead-lettered.
func (r *BatchReport) gaps(covered map[int64]bool, problem func(kind, format string, args ...any)) {
	for s := range covered {
		r.Sequence = max(r.Sequence, s)
	}
	for s := int64(1); s <= r.Sequence; s++ {
		if !covered[s] {
			problem("gap", "sequence %d neither accepted nor dead-lettered", s)
		}
	}
}

// problemList returns a func adding a problem to list, at most
// maxProblems of each kind, the first of each kind after those saying
// more were left out.
func problemList(list *[]string) func(kind, format string, args ...any) {
	kinds := map[string]int{}
	return func(kind, format string, args ...any) {
		switch kinds[kind]++; {
		case kinds[kind] <= maxProblems:
			*list = append(*list, kind+": "+fmt.Sprintf(format, args...))
		case kinds[kind] == maxProblems+1:
			*list = append(*list, kind+": … (more left out)")
		}
	}
}
