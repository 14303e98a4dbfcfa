package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/event"
)

// hookReceiver is a webhook receiver for the failure-policy tests. Unlike the
// recording fleet it records every request, failed ones included (arrival,
// answer, the connection it came on), measures concurrency overall and per
// entity, and lets a behaviour hijack the connection.
type hookReceiver struct {
	srv      *httptest.Server
	behave   hookBehavior
	verifier atomic.Pointer[standardwebhooks.Webhook]
	closing  chan struct{}
	notify   chan struct{}

	mu          sync.Mutex
	reqs        []*hookRequest
	perMsg      map[string]int
	inFlight    int
	maxInFlight int
	perEntity   map[string]int
	overlaps    []string // entities seen with two requests in flight at once
	badSigs     int
}

// hookRequest is one request as the receiver saw it.
type hookRequest struct {
	Path     string
	MsgID    string
	Entity   string
	Revision int64
	Attempt  int       // 1 for the first request carrying this webhook-id
	At       time.Time // arrival
	Done     time.Time // answered (or hijacked, or abandoned)
	Status   int       // 0: no response (connection reset, client gave up)
	Reused   bool      // came on a connection that had served a request before
	InFlight int       // requests in flight at arrival, this one included
}

// hookBehavior answers one request and returns the status it sent, 0 if it
// sent none. rq is filled in up to Attempt and Reused.
type hookBehavior func(w http.ResponseWriter, r *http.Request, rq *hookRequest) int

type hookConnKey struct{}

type hookConn struct{ served atomic.Int64 }

func startHookReceiver(t *testing.T, behave hookBehavior) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{
		behave: behave, closing: make(chan struct{}), notify: make(chan struct{}, 1),
		perMsg: map[string]int{}, perEntity: map[string]int{},
	}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, hookConnKey{}, &hookConn{})
	}
	rc.srv.Start()
	t.Cleanup(func() {
		close(rc.closing) // releases hanging handlers
		rc.srv.Close()
	})
	return rc
}

// URL of path on the receiver.
func (rc *hookReceiver) URL(path string) string { return rc.srv.URL + path }

// setSecret sets the endpoint secret signatures are checked with.
func (rc *hookReceiver) setSecret(t *testing.T, secret string) {
	t.Helper()
	v, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	rc.verifier.Store(v)
}

func (rc *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	rq := &hookRequest{Path: r.URL.Path, MsgID: r.Header.Get("webhook-id"), At: time.Now()}
	if c, ok := r.Context().Value(hookConnKey{}).(*hookConn); ok {
		rq.Reused = c.served.Add(1) > 1
	}
	body, _ := io.ReadAll(r.Body)
	var p event.Payload
	_ = json.Unmarshal(body, &p)
	rq.Entity, rq.Revision = p.Entity.ID, p.Entity.Revision
	verifier := rc.verifier.Load()
	badSig := rq.MsgID != "" && (verifier == nil || verifier.Verify(body, r.Header) != nil)

	rc.mu.Lock()
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

	var status int
	if badSig {
		w.WriteHeader(http.StatusUnauthorized)
		status = http.StatusUnauthorized
	} else {
		status = rc.behave(w, r, rq)
	}

	rc.mu.Lock()
	rq.Done, rq.Status = time.Now(), status
	rc.inFlight--
	if rq.Entity != "" {
		rc.perEntity[rq.Entity]--
	}
	rc.mu.Unlock()
	select {
	case rc.notify <- struct{}{}:
	default:
	}
}

// requests returns copies of the requests seen so far, in arrival order,
// that match keep (all when nil).
func (rc *hookReceiver) requests(keep func(hookRequest) bool) []hookRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []hookRequest
	for _, rq := range rc.reqs {
		if keep == nil || keep(*rq) {
			out = append(out, *rq)
		}
	}
	return out
}

func (rc *hookReceiver) stats() (maxInFlight, badSigs int, overlaps []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.maxInFlight, rc.badSigs, append([]string(nil), rc.overlaps...)
}

// waitFor waits until cond holds, re-checking after every answered request
// and every 100 ms (for conditions on things other than requests).
func (rc *hookReceiver) waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-rc.notify:
		case <-poll.C:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// delivered returns, per webhook-id, the first request answered 2xx.
func (rc *hookReceiver) delivered() map[string]hookRequest {
	out := map[string]hookRequest{}
	for _, rq := range rc.requests(func(rq hookRequest) bool { return rq.Status >= 200 && rq.Status < 300 }) {
		if _, ok := out[rq.MsgID]; !ok {
			out[rq.MsgID] = rq
		}
	}
	return out
}

// checkHookOrder requires each entity's first successful deliveries to come
// in strictly increasing revisions.
func checkHookOrder(t *testing.T, reqs []hookRequest) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int64{}
	for _, rq := range reqs {
		if rq.Status < 200 || rq.Status > 299 || seen[rq.MsgID] {
			continue
		}
		seen[rq.MsgID] = true
		if prev, ok := last[rq.Entity]; ok && rq.Revision <= prev {
			t.Errorf("entity %s: revision %d delivered after revision %d", rq.Entity, rq.Revision, prev)
		}
		last[rq.Entity] = rq.Revision
	}
}

// deadLetterReader follows a dead-letter topic from its start.
type deadLetterReader struct {
	cl      *kgo.Client
	letters []event.DeadLetter
}

func newDeadLetterReader(t *testing.T, a *app.App) *deadLetterReader {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers()...), kgo.ConsumeTopics(a.Topics().Dead),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &deadLetterReader{cl: cl}
}

// until reads dead letters until done holds for everything read so far.
func (d *deadLetterReader) until(t *testing.T, timeout time.Duration, what string, done func([]event.DeadLetter) bool) []event.DeadLetter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !done(d.letters) {
		fetches := d.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out after %v waiting for %s; dead letters so far: %s", timeout, what, describeDeadLetters(d.letters))
		}
		fetches.EachRecord(func(r *kgo.Record) {
			var dl event.DeadLetter
			if err := json.Unmarshal(r.Value, &dl); err != nil {
				t.Errorf("undecodable dead letter at offset %d: %v", r.Offset, err)
				return
			}
			d.letters = append(d.letters, dl)
		})
	}
	return d.letters
}

func describeDeadLetters(dls []event.DeadLetter) string {
	var parts []string
	for _, dl := range dls {
		entity, attempts := "", 0
		if dl.Delivery != nil {
			entity, attempts = dl.Delivery.Entity, dl.Delivery.Attempts
		}
		parts = append(parts, fmt.Sprintf("{%s %s attempts=%d %q}", entity, dl.Reason, attempts, dl.Detail))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// endpointGauge returns the value of the series of gauge name labelled with
// endpoint id in a's registry, and whether a reports one (only the owner of
// the endpoint's partition does).
func endpointGauge(t *testing.T, a *app.App, name, id string) (float64, bool) {
	t.Helper()
	families, err := a.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "endpoint" && l.GetValue() == id {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// waitForGroupMembers waits until group is stable with n members that each
// own at least one partition.
func waitForGroupMembers(t *testing.T, brokers []string, group string, n int) {
	t.Helper()
	waitForGroup(t, brokers, group, time.Minute, func(g kadm.DescribedGroup) (bool, string) {
		owning := 0
		for _, m := range g.Members {
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, tp := range c.Topics {
					if len(tp.Partitions) > 0 {
						owning++
						break
					}
				}
			}
		}
		return g.State == "Stable" && len(g.Members) == n && owning == n,
			fmt.Sprintf("state %s, %d members, %d owning partitions (want %d)", g.State, len(g.Members), owning, n)
	})
}

// waitForGroup describes group until ready accepts it, or fails the test
// after within with what ready said about the last description.
func waitForGroup(t *testing.T, brokers []string, group string, within time.Duration, ready func(kadm.DescribedGroup) (bool, string)) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(within)
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	last := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		described, err := adm.DescribeGroups(ctx, group)
		cancel()
		if err == nil {
			var ok bool
			if ok, last = ready(described[group]); ok {
				return
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not as wanted within %s: %s", group, within, last)
		}
		<-poll.C
	}
}
