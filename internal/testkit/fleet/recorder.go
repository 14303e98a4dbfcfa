package fleet

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/laneway/laneway/internal/plumbing/statuswriter"
	"github.com/laneway/laneway/internal/plumbing/stdverify"
)

// Recorder is a webhook receiver that records every request, answered or
// not, where the Fleet keeps only the deliveries it accepted: its path (any
// path is served), arrival, answer and end, the connection it came on, and
// the concurrency overall and per entity. The test's Answer decides each
// response, and may hang or take the connection over.
type Recorder struct {
	srv      *httptest.Server
	cfg      RecorderConfig
	verifier stdverify.Verifier
	closing  chan struct{}
	changed  chan struct{}
	arrivals chan int

	mu          sync.Mutex
	reqs        []*Request
	perMsg      map[string]int
	inFlight    int
	maxInFlight int
	perEntity   map[string]int
	overlaps    []string // entities seen with two requests in flight at once
	badSigs     int
}

// RecorderConfig is how a Recorder answers and what it checks.
type RecorderConfig struct {
	// Answer writes each response; nil answers 200.
	Answer Answer
	// Signed: a request carrying a webhook-id must be signed with the
	// secret set by SetSecret (none set yet: it is not). One that is not
	// is answered 401, without Answer, and counted.
	Signed bool
	// KeepBodies keeps each request's body and headers in its Request.
	KeepBodies bool
}

// Answer answers one request; rq is filled in up to InFlight.
type Answer func(w http.ResponseWriter, r *http.Request, rq *Request)

// Request is one request as the Recorder saw it.
type Request struct {
	N        int // its index in arrival order
	Path     string
	MsgID    string
	Entity   string
	Revision int64
	Attempt  int         // 1 for the first request carrying this webhook-id
	At       time.Time   // arrival
	Done     time.Time   // when its answer returned; zero while it runs
	Status   int         // the status answered; 0 for none (connection taken over, or the request ended first)
	Ended    bool        // the request's context had ended when its answer returned
	Reused   bool        // came on a connection that had served a request before
	InFlight int         // requests in flight at arrival, this one included
	Body     []byte      // with KeepBodies
	Header   http.Header // with KeepBodies
}

// Answered reports whether the request's answer returned with status code.
func (rq Request) Answered(code int) bool { return !rq.Done.IsZero() && rq.Status == code }

type connKey struct{}

type conn struct{ served atomic.Int64 }

// NewRecorder starts a Recorder on a loopback port.
func NewRecorder(cfg RecorderConfig) *Recorder {
	rc := &Recorder{
		cfg: cfg, closing: make(chan struct{}), changed: make(chan struct{}, 1), arrivals: make(chan int, 1000),
		perMsg: map[string]int{}, perEntity: map[string]int{},
	}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, &conn{})
	}
	rc.srv.Start()
	return rc
}

// Close releases answers waiting on Closing, then stops the server.
func (rc *Recorder) Close() {
	close(rc.closing)
	rc.srv.Close()
}

// URL of path on the Recorder.
func (rc *Recorder) URL(path string) string { return rc.srv.URL + path }

// SetSecret sets the endpoint secret signatures are checked with.
func (rc *Recorder) SetSecret(secret string) error {
	return rc.verifier.SetSecret(secret)
}

// Closing is closed when the Recorder closes, so that an answer that hangs
// can end.
func (rc *Recorder) Closing() <-chan struct{} { return rc.closing }

// Changed is signalled (coalesced) after every answer returns.
func (rc *Recorder) Changed() <-chan struct{} { return rc.changed }

// Arrivals gets each request's index as it arrives, before its answer;
// up to 1,000 wait to be taken, later ones are not sent.
func (rc *Recorder) Arrivals() <-chan int { return rc.arrivals }

func (rc *Recorder) serve(w http.ResponseWriter, r *http.Request) {
	rq := &Request{Path: r.URL.Path, MsgID: r.Header.Get("webhook-id"), At: time.Now()}
	if c, ok := r.Context().Value(connKey{}).(*conn); ok {
		rq.Reused = c.served.Add(1) > 1
	}
	body, _ := io.ReadAll(r.Body)
	var p struct {
		Entity struct {
			ID       string `json:"id"`
			Revision int64  `json:"revision"`
		} `json:"entity"`
	}
	_ = json.Unmarshal(body, &p)
	rq.Entity, rq.Revision = p.Entity.ID, p.Entity.Revision
	if rc.cfg.KeepBodies {
		rq.Body, rq.Header = body, r.Header.Clone()
	}
	badSig := rc.cfg.Signed && rq.MsgID != "" && !rc.verifier.Valid(body, r.Header)

	rc.arrive(rq, badSig)
	rw := statuswriter.Wrap(w)
	switch {
	case badSig:
		rw.WriteHeader(http.StatusUnauthorized)
	case rc.cfg.Answer != nil:
		rc.cfg.Answer(rw, r, rq)
	}
	rc.end(rq, rw, r.Context().Err() != nil)
}

// arrive records rq and announces it.
func (rc *Recorder) arrive(rq *Request, badSig bool) {
	rc.mu.Lock()
	rq.N = len(rc.reqs)
	rc.perMsg[rq.MsgID]++
	rq.Attempt = rc.perMsg[rq.MsgID]
	rc.inFlight++
	rq.InFlight = rc.inFlight
	rc.maxInFlight = max(rc.maxInFlight, rc.inFlight)
	if rq.Entity != "" {
		rc.perEntity[rq.Entity]++
		if rc.perEntity[rq.Entity] > 1 {
			rc.overlaps = append(rc.overlaps, rq.Entity)
		}
	}
	if badSig {
		rc.badSigs++
	}
	rc.reqs = append(rc.reqs, rq)
	rc.mu.Unlock()
	select {
	case rc.arrivals <- rq.N:
	default:
	}
}

// end records how rq was answered.
func (rc *Recorder) end(rq *Request, rw *statuswriter.Writer, ended bool) {
	rc.mu.Lock()
	rq.Done, rq.Ended, rq.Status = time.Now(), ended, rw.Status
	if rq.Status == 0 && !ended && !rw.Hijacked {
		rq.Status = http.StatusOK // net/http's implicit answer
	}
	rc.inFlight--
	if rq.Entity != "" {
		rc.perEntity[rq.Entity]--
	}
	rc.mu.Unlock()
	select {
	case rc.changed <- struct{}{}:
	default:
	}
}

// Requests returns copies of the requests seen so far, in arrival order,
// that match keep (all when nil).
func (rc *Recorder) Requests(keep func(Request) bool) []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []Request
	for _, rq := range rc.reqs {
		if keep == nil || keep(*rq) {
			out = append(out, *rq)
		}
	}
	return out
}

// Delivered returns, per webhook-id, the first request answered 2xx.
func (rc *Recorder) Delivered() map[string]Request {
	out := map[string]Request{}
	for _, rq := range rc.Requests(func(rq Request) bool { return rq.Status >= 200 && rq.Status < 300 }) {
		if _, ok := out[rq.MsgID]; !ok {
			out[rq.MsgID] = rq
		}
	}
	return out
}

// Stats are the most requests in flight at once, the requests whose
// signature failed, and the entities seen with two requests in flight.
func (rc *Recorder) Stats() (maxInFlight, badSigs int, overlaps []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.maxInFlight, rc.badSigs, append([]string(nil), rc.overlaps...)
}
