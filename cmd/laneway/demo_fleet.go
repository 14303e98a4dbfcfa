package main

import (
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/laneway/laneway/internal/plumbing/stdverify"
)

// demoFleet is the demo's receivers: one HTTP server on which /ep/{name}
// plays one customer's endpoint, answering after that endpoint's delay. It
// verifies every signature and measures publish-to-receipt latency.
type demoFleet struct {
	srv *http.Server
	ln  net.Listener

	mu        sync.Mutex
	receivers map[string]*receiver
	window    []time.Duration // latencies of fast receivers since the last take
}

// receiver is one simulated endpoint.
type receiver struct {
	name     string
	slow     bool
	min, max time.Duration // answer delay, uniform in [min, max]
	verifier stdverify.Verifier

	delivered, badSigs, inFlight atomic.Int64
}

func startDemoFleet(listen string) (*demoFleet, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	f := &demoFleet{ln: ln, receivers: map[string]*receiver{}}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// Close stops the server at once, ending requests still waiting.
func (f *demoFleet) Close() { _ = f.srv.Close() }

// Port is the port the fleet listens on.
func (f *demoFleet) Port() int { return f.ln.Addr().(*net.TCPAddr).Port }

// add registers a receiver answering after a delay in [min, max].
func (f *demoFleet) add(name string, slow bool, min, max time.Duration) *receiver {
	r := &receiver{name: name, slow: slow, min: min, max: max}
	f.mu.Lock()
	f.receivers[name] = r
	f.mu.Unlock()
	return r
}

func (f *demoFleet) serve(w http.ResponseWriter, req *http.Request) {
	name, ok := strings.CutPrefix(req.URL.Path, "/ep/")
	f.mu.Lock()
	r := f.receivers[name]
	f.mu.Unlock()
	if !ok || r == nil || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if !r.verifier.Valid(body, req.Header) {
		r.badSigs.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	delay := r.min
	if r.max > r.min {
		delay += rand.N(r.max - r.min)
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-req.Context().Done():
		return // Laneway gave up (its attempt timeout) or the fleet is closing
	}
	w.WriteHeader(http.StatusNoContent)
	r.delivered.Add(1)
	if r.slow {
		return
	}
	var p struct {
		Timestamp time.Time `json:"timestamp"`
	}
	if json.Unmarshal(body, &p) == nil && !p.Timestamp.IsZero() {
		f.mu.Lock()
		if len(f.window) < 1_000_000 {
			f.window = append(f.window, time.Since(p.Timestamp))
		}
		f.mu.Unlock()
	}
}

// takeLatencies returns the fast receivers' latencies since the last call.
func (f *demoFleet) takeLatencies() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.window
	f.window = nil
	return w
}

// percentile returns the p-th percentile (0 < p ≤ 1) of ds, which it sorts.
func percentile(ds []time.Duration, p float64) (time.Duration, error) {
	if len(ds) == 0 {
		return 0, errors.New("no samples")
	}
	slices.Sort(ds)
	i := int(float64(len(ds))*p+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)], nil
}
