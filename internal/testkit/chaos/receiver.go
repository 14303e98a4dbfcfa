package chaos

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/laneway/laneway/internal/plumbing/stdverify"
	"github.com/laneway/laneway/internal/testkit/ordercheck"
)

// Mode is how a receiver endpoint answers right now.
type Mode int32

const (
	ModeOK    Mode = iota // 204 after the endpoint's delay
	Mode500               // 500 at once
	Mode503               // 503 with Retry-After: 1
	ModeHang              // no answer until the sender gives up
	ModeReset             // the connection is reset before any answer
)

func (m Mode) String() string {
	switch m {
	case ModeOK:
		return "ok"
	case Mode500:
		return "500"
	case Mode503:
		return "503+retry-after"
	case ModeHang:
		return "hang"
	case ModeReset:
		return "reset"
	}
	return "unknown"
}

// Receivers is the receiver fleet: one HTTP server per endpoint, each on a
// port of its own (as real endpoints have hosts of their own). Every request
// is verified with the official Standard Webhooks library; every delivery
// answered 2xx is appended to the receipt log (NDJSON of
// ordercheck.Receipt) with its arrival sequence number, and every verified
// request, answered or not, to the request log with its arrival, its end
// and its status (0: none sent), from which the checker finds two requests
// of one (endpoint, entity) in flight at once.
type Receivers struct {
	seq     atomic.Int64
	closing chan struct{}
	notify  chan struct{}

	mu       sync.Mutex
	eps      []*recvEndpoint
	log      *lineLog // receipts
	reqLog   *lineLog // requests
	receipts []ordercheck.Receipt
	requests []ordercheck.Receipt
	closed   bool
}

// behaviour is how an endpoint answers the requests that arrive while it
// is set: after hold (the endpoint's own delay when zero), as mode says.
type behaviour struct {
	mode Mode
	hold time.Duration
}

type recvEndpoint struct {
	r        *Receivers
	name     string
	id       atomic.Pointer[string]
	verifier stdverify.Verifier
	delay    time.Duration
	behave   atomic.Pointer[behaviour]
	ln       net.Listener
	srv      *http.Server

	requests, failed, badSigs, overlaps, inFlight atomic.Int64

	mu      sync.Mutex
	running map[string]int // entity -> requests in flight
}

// NewReceivers opens the receipt log at path and the request log at
// requestsPath.
func NewReceivers(path, requestsPath string) (*Receivers, error) {
	log, err := createLineLog(path)
	if err != nil {
		return nil, err
	}
	reqLog, err := createLineLog(requestsPath)
	if err != nil {
		_ = log.close()
		return nil, err
	}
	return &Receivers{closing: make(chan struct{}), notify: make(chan struct{}, 1), log: log, reqLog: reqLog}, nil
}

// Add starts the server of one endpoint and returns its URL. delay is how
// long a healthy answer waits.
func (r *Receivers) Add(name string, delay time.Duration) (*recvEndpoint, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	ep := &recvEndpoint{r: r, name: name, delay: delay, ln: ln, running: map[string]int{}}
	ep.behave.Store(&behaviour{mode: ModeOK})
	ep.srv = &http.Server{Handler: ep, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() { _ = ep.srv.Serve(ln) }()
	r.mu.Lock()
	r.eps = append(r.eps, ep)
	r.mu.Unlock()
	return ep, "http://" + ln.Addr().String() + "/hooks/" + name, nil
}

// SetEndpoint names the endpoint id and the secret its deliveries are signed with.
func (ep *recvEndpoint) SetEndpoint(id, secret string) error {
	if err := ep.verifier.SetSecret(secret); err != nil {
		return err
	}
	ep.id.Store(&id)
	return nil
}

// SetMode changes how the endpoint answers requests from now on (ModeOK:
// after the endpoint's own delay).
func (ep *recvEndpoint) SetMode(m Mode) { ep.behave.Store(&behaviour{mode: m}) }

// SetHold makes the endpoint hold each request that arrives from now on for
// hold, then answer it as mode says (ModeOK or Mode503, Mode500). Requests
// already held keep their own hold.
func (ep *recvEndpoint) SetHold(m Mode, hold time.Duration) {
	ep.behave.Store(&behaviour{mode: m, hold: hold})
}

// InFlight is the number of verified requests the endpoint is answering.
func (ep *recvEndpoint) InFlight() int64 { return ep.inFlight.Load() }

// RunningEntities are the entities with a request in flight at the endpoint.
func (ep *recvEndpoint) RunningEntities() []string {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return slices.Collect(maps.Keys(ep.running))
}

// Requests is the number of requests the endpoint has seen.
func (ep *recvEndpoint) Requests() int64 { return ep.requests.Load() }

func (ep *recvEndpoint) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	seq := ep.r.seq.Add(1)
	ep.requests.Add(1)
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil || !ep.verifier.Valid(body, req.Header) {
		ep.badSigs.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var p struct {
		ID     string `json:"id"`
		Entity struct {
			ID       string `json:"id"`
			Revision int64  `json:"revision"`
		} `json:"entity"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.ID != req.Header.Get("webhook-id") {
		ep.badSigs.Add(1) // a signed body that is not the contract's is as bad
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ep.mu.Lock()
	ep.running[p.Entity.ID]++
	if ep.running[p.Entity.ID] > 1 {
		ep.overlaps.Add(1)
	}
	ep.mu.Unlock()
	ep.inFlight.Add(1)
	rq := ordercheck.Receipt{Endpoint: *ep.id.Load(), EventID: p.ID, Entity: p.Entity.ID, Revision: p.Entity.Revision, Seq: seq, At: at}
	// The request ends (for the logs and the in-flight counts) before its
	// answer leaves: net/http sends a handler's response when the handler
	// returns, and a reset is done after end. So a sender's next request
	// never seems to arrive before this one ended.
	end := func(status int) {
		rq.Done, rq.Status = time.Now(), status
		ep.mu.Lock()
		if ep.running[p.Entity.ID]--; ep.running[p.Entity.ID] <= 0 {
			delete(ep.running, p.Entity.ID)
		}
		ep.mu.Unlock()
		ep.inFlight.Add(-1)
		if status < 200 || status > 299 {
			ep.failed.Add(1)
		}
		ep.r.record(rq)
	}
	ep.answer(w, req, end)
}

// answer replies as the endpoint's behaviour at arrival says, calling end
// with the status once the answer is decided (0 when none is sent) and
// before it is sent.
func (ep *recvEndpoint) answer(w http.ResponseWriter, req *http.Request, end func(status int)) {
	b := ep.behave.Load()
	hold := b.hold
	if hold == 0 && b.mode == ModeOK {
		hold = ep.delay
	}
	if hold > 0 {
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			end(0)
			return
		case <-ep.r.closing:
			end(0)
			return
		}
	}
	switch b.mode {
	case Mode500:
		end(http.StatusInternalServerError)
		w.WriteHeader(http.StatusInternalServerError)
	case Mode503:
		end(http.StatusServiceUnavailable)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	case ModeHang:
		select {
		case <-req.Context().Done():
		case <-ep.r.closing:
		}
		end(0)
	case ModeReset:
		end(0)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
		}
	default:
		end(http.StatusNoContent)
		w.WriteHeader(http.StatusNoContent)
	}
}

// record logs one request, and its receipt when it was answered 2xx.
func (r *Receivers) record(rc ordercheck.Receipt) {
	line, _ := json.Marshal(rc)
	delivered := rc.Status >= 200 && rc.Status <= 299
	r.mu.Lock()
	if !r.closed {
		r.requests = append(r.requests, rc)
		r.reqLog.write(line)
		if delivered {
			r.receipts = append(r.receipts, rc)
			r.log.write(line)
		}
	}
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// Changed is signalled (coalesced) after every request that ended.
func (r *Receivers) Changed() <-chan struct{} { return r.notify }

// Receipts returns a copy of the receipts so far.
func (r *Receivers) Receipts() []ordercheck.Receipt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ordercheck.Receipt(nil), r.receipts...)
}

// RequestsOf returns a copy of the requests endpoint id has seen so far
// (verified ones that ended).
func (r *Receivers) RequestsOf(id string) []ordercheck.Receipt {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ordercheck.Receipt
	for _, rq := range r.requests {
		if rq.Endpoint == id {
			out = append(out, rq)
		}
	}
	return out
}

// Count is the number of receipts so far.
func (r *Receivers) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.receipts)
}

// ReceiverStats are the fleet's counters of what the receipt log does not hold.
type ReceiverStats struct {
	Requests      int64 `json:"requests"`       // every request, answered or not
	Failed        int64 `json:"failed"`         // answered non-2xx by a failing mode, or abandoned by the sender
	BadSignatures int64 `json:"bad_signatures"` // signature or body did not verify: must stay 0
	Overlaps      int64 `json:"overlaps"`       // a request for an (endpoint, entity) while another was in flight
}

// Stats sums the counters over the endpoints.
func (r *Receivers) Stats() ReceiverStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s ReceiverStats
	for _, ep := range r.eps {
		s.Requests += ep.requests.Load()
		s.Failed += ep.failed.Load()
		s.BadSignatures += ep.badSigs.Load()
		s.Overlaps += ep.overlaps.Load()
	}
	return s
}

// Close stops the servers, releases hanging requests and flushes the log.
func (r *Receivers) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	eps := r.eps
	r.mu.Unlock()
	close(r.closing)
	for _, ep := range eps {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = ep.srv.Shutdown(ctx)
		cancel()
		_ = ep.srv.Close()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return joinErrs(r.log.close(), r.reqLog.close())
}
