// Package benchrecv is a lean webhook receiver for benchmarks: it answers at
// once (or after a fixed delay), and instead of keeping every request it
// keeps counters and one receipt time per expected delivery. That keeps the
// receiver's own CPU cost small, which matters when it shares a small machine
// with the system being measured.
//
// It still checks what a benchmark must not get wrong: duplicates, per-entity
// order, two deliveries of one entity in flight to one endpoint at once, the
// highest concurrency each endpoint saw and, when asked to, the Standard
// Webhooks signature of every delivery.
//
// The receiver does not parse bodies to identify deliveries: the caller maps
// each webhook-id to a slot, entity and revision (Config.Lookup), because the
// caller generated the events and knows them.
//
// A BatchReceiver plays batch endpoints with a Receiver's ports, receipts
// and signature checks: it reads each batch's events (its Lookup maps their
// ids) and checks their sequence, their order and the batch's webhook-id.
package benchrecv

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/laneway/laneway/internal/plumbing/sockpeek"
	"github.com/laneway/laneway/internal/plumbing/stdverify"
)

// Delivery identifies one expected delivery.
type Delivery struct {
	Slot     int   // in [0, Config.Slots): one per (event, endpoint)
	Entity   int   // entity number; order is checked per (endpoint, entity)
	Revision int64 // increases with each event of the entity
}

// Config configures a Receiver.
type Config struct {
	// Endpoints is how many endpoints the receiver plays, numbered from 0.
	Endpoints int
	// Slots is the number of expected deliveries.
	Slots int
	// Lookup maps the webhook-id of a request to endpoint n to the delivery
	// it must be. Deliveries it does not know are counted as unmatched and
	// still answered with 204.
	Lookup func(endpoint int, msgID string) (Delivery, bool)
	// Delay is how long each answer waits. Default 0.
	Delay time.Duration
	// SharedListener serves every endpoint from one port. By default each
	// endpoint gets its own port, as real endpoints have their own hosts:
	// a client's keep-alive pool is per host, so one shared port would make
	// every endpoint compete for one pool.
	SharedListener bool
	// Ports, when above 0 and below Endpoints, serves endpoint n on port
	// n mod Ports: the middle way when one port per endpoint would use more
	// file descriptors than the process may open. Ignored with SharedListener.
	Ports int
	// CountOpenOnly counts a request in flight only while its connection
	// is open: a sender that gave up on it (a timeout) and closed the
	// connection no longer has it in flight, even before the handler
	// notices the close (which can lag the sender's next request by a
	// scheduling delay). It peeks at the connection of every request in
	// flight at each arrival, so it suits endpoints that hold few.
	CountOpenOnly bool
	// Verify checks signatures with the official Standard Webhooks library
	// and the payload's id and revision. It costs a body read and an HMAC per
	// request, so it is off by default.
	Verify bool
}

// Stats are the receiver's counters.
type Stats struct {
	Requests          int64 `json:"requests"`           // requests to endpoint paths
	Received          int64 `json:"received"`           // distinct expected deliveries
	Duplicates        int64 `json:"duplicates"`         // expected deliveries seen again
	OrderViolations   int64 `json:"order_violations"`   // a revision not above the last one of its entity
	EntityOverlaps    int64 `json:"entity_overlaps"`    // a second delivery of an entity while one was in flight
	Unmatched         int64 `json:"unmatched"`          // requests Lookup did not know
	BadSignatures     int64 `json:"bad_signatures"`     // with Verify: signature did not verify
	PayloadMismatches int64 `json:"payload_mismatches"` // with Verify: body id/revision differ from Lookup's
	Raw               int64 `json:"raw"`                // requests to RawURL
}

// Receiver is a running receiver.
type Receiver struct {
	cfg Config
	ports
	receipts
	endpoints []*endpointState

	requests, duplicates, orderViolations, entityOverlaps atomic.Int64
	unmatched, badSignatures, payloadMismatches, raw      atomic.Int64
}

// endpointState is what the receiver tracks for one endpoint.
type endpointState struct {
	stdverify.Verifier
	behavior    atomic.Pointer[Behavior] // nil: Config.Delay and 204
	inFlight    atomic.Int64
	maxInFlight atomic.Int64

	mu      sync.Mutex
	last    map[int]int64 // entity → highest revision received
	running map[int]int   // entity → requests in flight

	openMu sync.Mutex
	open   map[*http.Request]*sockpeek.Peeker // with CountOpenOnly: requests in flight
}

// Start listens on loopback and serves until Close.
func Start(cfg Config) (*Receiver, error) {
	if cfg.Endpoints <= 0 || cfg.Slots < 0 || cfg.Lookup == nil {
		return nil, errors.New("benchrecv: Endpoints > 0, Slots >= 0 and Lookup are required")
	}
	r := &Receiver{cfg: cfg, receipts: receipts{at: make([]atomic.Int64, cfg.Slots)}}
	for range cfg.Endpoints {
		r.endpoints = append(r.endpoints, &endpointState{last: map[int]int64{}, running: map[int]int{}, open: map[*http.Request]*sockpeek.Peeker{}})
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			p := sockpeek.New(c)
			return context.WithValue(ctx, peekerKey{}, &p)
		}}
	if err := r.listen(listenerCount(cfg), srv); err != nil {
		return nil, err
	}
	return r, nil
}

// ports are the loopback ports a receiver's endpoints are served on, by
// one http.Server.
type ports struct {
	srv       *http.Server
	listeners []net.Listener
	serving   sync.WaitGroup
}

// listen opens count loopback ports and serves srv on them until close.
func (p *ports) listen(count int, srv *http.Server) error {
	for range count {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, open := range p.listeners {
				_ = open.Close()
			}
			return fmt.Errorf("benchrecv: listen: %w", err)
		}
		p.listeners = append(p.listeners, ln)
	}
	p.srv = srv
	for _, ln := range p.listeners {
		p.serving.Go(func() { _ = srv.Serve(ln) }) // returns ErrServerClosed on close
	}
	return nil
}

// close stops serving, drops open connections and waits for the server to
// return on every port.
func (p *ports) close() {
	_ = p.srv.Close()
	p.serving.Wait()
}

// url is endpoint n's URL, path followed by n, on port n mod the ports.
func (p *ports) url(path string, n int) string {
	return "http://" + p.listeners[n%len(p.listeners)].Addr().String() + path + strconv.Itoa(n)
}

// receipts holds, per slot, the Unix nanoseconds of the first receipt
// (0 = not yet). The compare-and-swap from 0 is also the duplicate test.
type receipts struct {
	at       []atomic.Int64
	received atomic.Int64
}

// firstReceipt records slot's receipt at now (Unix ns) and reports
// whether it is the slot's first.
func (rc *receipts) firstReceipt(slot int, now int64) bool {
	if !rc.at[slot].CompareAndSwap(0, now) {
		return false
	}
	rc.received.Add(1)
	return true
}

// Received is the number of distinct expected deliveries so far.
func (rc *receipts) Received() int64 { return rc.received.Load() }

// ReceivedAt is when slot's delivery first arrived, in Unix nanoseconds, or 0.
func (rc *receipts) ReceivedAt(slot int) int64 { return rc.at[slot].Load() }

// listenerCount is how many ports cfg asks for.
func listenerCount(cfg Config) int {
	switch {
	case cfg.SharedListener:
		return 1
	case cfg.Ports > 0 && cfg.Ports < cfg.Endpoints:
		return cfg.Ports
	}
	return cfg.Endpoints
}

// Close stops serving, drops open connections and waits for the servers to return.
func (r *Receiver) Close() { r.close() }

// URL is endpoint n's delivery URL.
func (r *Receiver) URL(n int) string { return r.url("/ep/", n) }

// Ports is how many ports the endpoints are spread over.
func (r *Receiver) Ports() int { return len(r.listeners) }

// Behavior is how one endpoint answers, when it should differ from
// Config.Delay and 204.
type Behavior struct {
	// Hold, when not nil, keeps every request waiting until it is closed
	// (or the sender gives up): an endpoint that hangs, or a paused one.
	// Closing it releases the requests already waiting.
	Hold <-chan struct{}
	// Delay is how long each answer waits (after Hold).
	Delay time.Duration
	// Status is the answer's status code; 0 means 204.
	Status int
}

// SetBehavior changes how endpoint n answers requests that arrive from now
// on; requests already waiting keep the behavior they arrived with.
func (r *Receiver) SetBehavior(n int, b Behavior) { r.endpoints[n].behavior.Store(&b) }

// InFlight is the number of requests endpoint n is answering now.
func (r *Receiver) InFlight(n int) int64 { return r.endpoints[n].inFlight.Load() }

// RawURL accepts any POST and only counts it: the baseline target.
func (r *Receiver) RawURL() string { return "http://" + r.listeners[0].Addr().String() + "/raw" }

// SetSecret sets the secret endpoint n's deliveries are signed with (used
// only with Verify).
func (r *Receiver) SetSecret(n int, secret string) error { return r.endpoints[n].SetSecret(secret) }

// Unmatched is the number of requests Lookup did not know.
func (r *Receiver) Unmatched() int64 { return r.unmatched.Load() }

// MaxInFlight is the highest number of concurrent requests endpoint n saw.
func (r *Receiver) MaxInFlight(n int) int64 { return r.endpoints[n].maxInFlight.Load() }

// Stats returns the counters.
func (r *Receiver) Stats() Stats {
	return Stats{
		Requests: r.requests.Load(), Received: r.Received(), Duplicates: r.duplicates.Load(),
		OrderViolations: r.orderViolations.Load(), EntityOverlaps: r.entityOverlaps.Load(),
		Unmatched: r.unmatched.Load(), BadSignatures: r.badSignatures.Load(),
		PayloadMismatches: r.payloadMismatches.Load(), Raw: r.raw.Load(),
	}
}

// ServeHTTP routes /raw and /ep/{n}.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/raw" {
		r.serveRaw(w, req)
		return
	}
	rest, ok := strings.CutPrefix(req.URL.Path, "/ep/")
	n, err := strconv.Atoi(rest)
	if !ok || err != nil || n < 0 || n >= len(r.endpoints) {
		http.NotFound(w, req)
		return
	}
	r.serveEndpoint(w, req, n)
}

func (r *Receiver) serveRaw(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	r.answer(w, req, Behavior{Delay: r.cfg.Delay})
	r.raw.Add(1)
}

func (r *Receiver) behaviorOf(ep *endpointState) Behavior {
	if b := ep.behavior.Load(); b != nil {
		return *b
	}
	return Behavior{Delay: r.cfg.Delay}
}

// answer waits as b says and replies. The waits end early when the sender
// gives up or the receiver closes, so a hanging endpoint never keeps a
// goroutine past its request.
func (r *Receiver) answer(w http.ResponseWriter, req *http.Request, b Behavior) {
	done := req.Context().Done()
	if b.Hold != nil {
		select {
		case <-b.Hold:
		case <-done:
			return
		}
	}
	if b.Delay > 0 {
		t := time.NewTimer(b.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
			return
		}
	}
	w.WriteHeader(cmp.Or(b.Status, http.StatusNoContent))
}

func (r *Receiver) serveEndpoint(w http.ResponseWriter, req *http.Request, n int) {
	ep := r.endpoints[n]
	b := r.behaviorOf(ep) // as it is when the request arrives
	r.requests.Add(1)
	if r.cfg.CountOpenOnly {
		ep.enterOpen(req)
		defer ep.leaveOpen(req)
	} else {
		ep.enter()
		defer ep.inFlight.Add(-1)
	}
	msgID := req.Header.Get("webhook-id")
	d, known := r.cfg.Lookup(n, msgID)
	if r.cfg.Verify {
		if !r.verify(w, req, ep, d, known, msgID) {
			return
		}
	} else {
		_, _ = io.Copy(io.Discard, req.Body)
	}
	if !known {
		r.unmatched.Add(1)
		r.answer(w, req, b)
		return
	}
	r.record(ep, d)
	defer ep.leave(d.Entity)
	r.answer(w, req, b)
}

// enter counts the request in flight and raises the endpoint's maximum.
func (ep *endpointState) enter() {
	cur := ep.inFlight.Add(1)
	for {
		old := ep.maxInFlight.Load()
		if cur <= old || ep.maxInFlight.CompareAndSwap(old, cur) {
			return
		}
	}
}

// peekerKey keeps a Peeker of the request's connection in its context
// (CountOpenOnly).
type peekerKey struct{}

// enterOpen counts req in flight with the requests whose connection is
// still open, and raises the endpoint's maximum.
func (ep *endpointState) enterOpen(req *http.Request) {
	p, _ := req.Context().Value(peekerKey{}).(*sockpeek.Peeker)
	if p == nil {
		p = &sockpeek.Peeker{} // Unknown: counts as open
	}
	ep.openMu.Lock()
	defer ep.openMu.Unlock()
	cur := int64(1)
	for _, other := range ep.open {
		if other.Peek() != sockpeek.Closed {
			cur++
		}
	}
	ep.open[req] = p
	ep.inFlight.Store(int64(len(ep.open)))
	if cur > ep.maxInFlight.Load() {
		ep.maxInFlight.Store(cur)
	}
}

func (ep *endpointState) leaveOpen(req *http.Request) {
	ep.openMu.Lock()
	defer ep.openMu.Unlock()
	delete(ep.open, req)
	ep.inFlight.Store(int64(len(ep.open)))
}

// record checks a known delivery on arrival. Arrival is the right moment for
// the order check: a sender that keeps order starts an entity's next delivery
// only after this one has been answered.
func (r *Receiver) record(ep *endpointState, d Delivery) {
	first := r.firstReceipt(d.Slot, time.Now().UnixNano())
	if !first {
		r.duplicates.Add(1)
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.running[d.Entity] > 0 {
		r.entityOverlaps.Add(1)
	}
	ep.running[d.Entity]++
	if !first {
		return // a replay of an old revision is allowed (at least once), not disorder
	}
	if last, seen := ep.last[d.Entity]; seen && d.Revision <= last {
		r.orderViolations.Add(1)
		return
	}
	ep.last[d.Entity] = d.Revision
}

func (ep *endpointState) leave(entity int) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.running[entity]--; ep.running[entity] <= 0 {
		delete(ep.running, entity)
	}
}

// verify checks the signature and that the body is the delivery Lookup
// named. It answers 401 itself on a bad signature (so the sender retries, as
// it would with a real receiver) and reports whether to go on.
func (r *Receiver) verify(w http.ResponseWriter, req *http.Request, ep *endpointState, d Delivery, known bool, msgID string) bool {
	body, err := io.ReadAll(req.Body)
	if err != nil || !ep.Valid(body, req.Header) {
		r.badSignatures.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
		return false
	}
	if known && !payloadMatches(body, msgID, d.Revision) {
		r.payloadMismatches.Add(1)
	}
	return true
}

func payloadMatches(body []byte, msgID string, revision int64) bool {
	var p struct {
		ID     string `json:"id"`
		Entity struct {
			Revision int64 `json:"revision"`
		} `json:"entity"`
	}
	return json.Unmarshal(body, &p) == nil && p.ID == msgID && p.Entity.Revision == revision
}
