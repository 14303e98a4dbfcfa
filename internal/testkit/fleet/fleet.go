// Package fleet is the recording webhook receivers of tests and
// benchmarks. A Fleet is one HTTP server whose path /ep/{n} plays endpoint
// n: it verifies every signature with the official Standard Webhooks
// library, measures each endpoint's concurrency and records the deliveries
// it accepted, in order. A Recorder serves any path and records every
// request, failed and abandoned ones included, with its answer and end. A
// BatchReceiver plays one batch endpoint: it verifies each batch, refuses
// and fails batches as told, and keeps the batches it accepted, in order.
package fleet

import (
	"cmp"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/laneway/laneway/internal/plumbing/statuswriter"
	"github.com/laneway/laneway/internal/plumbing/stdverify"
)

// Receipt is one delivery as the receiver saw it.
type Receipt struct {
	MsgID     string
	Type      string // the payload's type: the event's, or the operator notification's
	Entity    string
	Revision  int64
	Timestamp time.Time // the payload's timestamp: the event's occurred_at
	At        time.Time // when the receiver accepted it
	Data      json.RawMessage
}

// Behavior decides how an endpoint answers; nil answers 204 at once.
type Behavior func(w http.ResponseWriter, r *http.Request, attempt int)

// Fleet is the receiver fleet.
type Fleet struct {
	srv *http.Server
	ln  net.Listener

	mu        sync.Mutex
	endpoints map[int]*Endpoint
	notify    chan struct{}
	total     atomic.Int64
}

// Endpoint is one receiver's state.
type Endpoint struct {
	N        int
	verifier stdverify.Verifier
	behavior Behavior

	inFlight    atomic.Int64
	maxInFlight atomic.Int64
	badSigs     atomic.Int64

	mu       sync.Mutex
	receipts []Receipt
	attempts map[string]int
}

// Start listens on a loopback port.
func Start() (*Fleet, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Fleet{ln: ln, endpoints: map[int]*Endpoint{}, notify: make(chan struct{}, 1)}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// Close stops the server.
func (f *Fleet) Close() { _ = f.srv.Close() }

// URL of endpoint n.
func (f *Fleet) URL(n int) string { return "http://" + f.ln.Addr().String() + "/ep/" + strconv.Itoa(n) }

// Add registers endpoint n with the secret its deliveries are signed with.
func (f *Fleet) Add(n int, secret string, b Behavior) (*Endpoint, error) {
	ep := &Endpoint{N: n, behavior: b, attempts: map[string]int{}}
	if err := ep.verifier.SetSecret(secret); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.endpoints[n] = ep
	f.mu.Unlock()
	return ep, nil
}

// Total is the number of accepted deliveries across the fleet.
func (f *Fleet) Total() int64 { return f.total.Load() }

// Changed is signalled (coalesced) after every accepted delivery, so tests
// can wait on progress with a deadline instead of sleeping.
func (f *Fleet) Changed() <-chan struct{} { return f.notify }

func (f *Fleet) serve(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/ep/"))
	f.mu.Lock()
	ep := f.endpoints[n]
	f.mu.Unlock()
	if err != nil || ep == nil {
		http.NotFound(w, r)
		return
	}
	if ep.handle(w, r) {
		f.total.Add(1)
		select {
		case f.notify <- struct{}{}:
		default:
		}
	}
}

// handle answers one request and reports whether it counted as delivered.
func (ep *Endpoint) handle(w http.ResponseWriter, r *http.Request) bool {
	cur := ep.inFlight.Add(1)
	defer ep.inFlight.Add(-1)
	for {
		old := ep.maxInFlight.Load()
		if cur <= old || ep.maxInFlight.CompareAndSwap(old, cur) {
			break
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return false
	}
	if !ep.verifier.Valid(body, r.Header) {
		ep.badSigs.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
		return false
	}
	var p struct {
		Type   string `json:"type"`
		Entity struct {
			ID       string `json:"id"`
			Revision int64  `json:"revision"`
		} `json:"entity"`
		Data      json.RawMessage `json:"data"`
		Timestamp time.Time       `json:"timestamp"`
	}
	_ = json.Unmarshal(body, &p)
	msgID := r.Header.Get("webhook-id")
	ep.mu.Lock()
	ep.attempts[msgID]++
	attempt := ep.attempts[msgID]
	ep.mu.Unlock()
	rec := statuswriter.Wrap(w)
	if ep.behavior != nil {
		ep.behavior(rec, r, attempt)
	} else {
		w.WriteHeader(http.StatusNoContent)
	}
	if status := cmp.Or(rec.Status, http.StatusOK); status < 200 || status > 299 { // 0: net/http's implicit 200
		return false
	}
	ep.mu.Lock()
	ep.receipts = append(ep.receipts, Receipt{
		MsgID: msgID, Type: p.Type, Entity: p.Entity.ID, Revision: p.Entity.Revision, Timestamp: p.Timestamp, At: time.Now(), Data: p.Data,
	})
	ep.mu.Unlock()
	return true
}

// Receipts returns a copy of what the endpoint accepted, in arrival order.
func (ep *Endpoint) Receipts() []Receipt {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return append([]Receipt(nil), ep.receipts...)
}

// MaxInFlight is the highest number of concurrent requests seen.
func (ep *Endpoint) MaxInFlight() int64 { return ep.maxInFlight.Load() }

// BadSignatures counts requests whose signature did not verify.
func (ep *Endpoint) BadSignatures() int64 { return ep.badSigs.Load() }
