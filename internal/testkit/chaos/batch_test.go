package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/ops/deadletter"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/testenv"
	"github.com/laneway/laneway/receiver"
)

// The batch test's scale: two batch endpoints (a tenant each) getting
// the feed test's feedRate facts/s each over four entities, in batches of
// at most batchMaxEvents; a phase waits until every receiver accepted
// batchProgress more events (three seconds of load).
const (
	batchEndpoints = 2
	batchProgress  = 45
	batchMaxEvents = 20
	batchMaxWaitMs = 100
	// batchBodyLimit: the receivers answer 413 above it. A fact's item is
	// about 170 bytes, so a batch of more than 6 is refused and split (a
	// backlog goes in batches of 20: 20, 10, 5); the one oversized event
	// of each endpoint is dead-lettered.
	batchBodyLimit = 1200
	batchFailRate  = 0.1                    // of the other batches answered 503
	batchHold      = 20 * time.Millisecond  // the most a receiver takes over a batch
	batchLimit     = 30 * time.Second       // for any one condition
	batchDeadPoll  = 500 * time.Millisecond // between dead-letter searches while draining
)

func batchOf(evs ...receiver.FeedEvent) []receiver.FeedEvent { return evs }

func deadOf(id string, seq int64, reason string) event.DeadLetter {
	return event.DeadLetter{ID: id + ":ep", Reason: reason, Delivery: &event.Delivery{EventID: id, Sequence: seq}}
}

// TestBatchCheck makes sure the batch checker fails what it must: a batch
// above max_events, a new event below a sequence accepted before, an
// entity going back, an id nobody published, a sequence neither accepted
// nor dead, a lost fact, a too-large letter without its sequence; and
// lets pass a batch sent again, an event appended again at a higher
// sequence, dead events and ambiguous publishes.
func TestBatchCheck(t *testing.T) {
	pub := []FeedPublished{
		{ID: "a1", Entity: "a", Revision: 1}, {ID: "b1", Entity: "b", Revision: 1}, {ID: "a2", Entity: "a", Revision: 2},
		{ID: "big", Entity: "big", Revision: 1}, {ID: "b2", Entity: "b", Revision: 2}, {ID: "a3", Entity: "a", Revision: 3, Ambiguous: true},
	}
	a1, b1, a2 := feedEvent(1, "a1", "a", 1), feedEvent(2, "b1", "b", 1), feedEvent(3, "a2", "a", 2)
	b2, a1again := feedEvent(5, "b2", "b", 2), feedEvent(6, "a1", "a", 1)
	big := deadOf("big", 4, event.ReasonTooLarge)
	good := [][]receiver.FeedEvent{batchOf(a1, b1), batchOf(a1, b1, a2), batchOf(b2, a1again)}
	if r := CheckBatches(pub, good, []event.DeadLetter{big}, 3); !r.Pass() || r.Duplicates != 3 || r.Ambiguous != 1 || r.Dead[event.ReasonTooLarge] != 1 {
		t.Fatalf("good batches failed: %s", r)
	}
	// Each case has one problem, of the kind it is named after.
	bad := map[string]struct {
		batches [][]receiver.FeedEvent
		dead    []event.DeadLetter
	}{
		"size":         {[][]receiver.FeedEvent{batchOf(a1, b1, a2, b2)}, []event.DeadLetter{big}},
		"order":        {[][]receiver.FeedEvent{batchOf(a1, a2), batchOf(b1, b2)}, []event.DeadLetter{big}},
		"entity order": {[][]receiver.FeedEvent{batchOf(feedEvent(1, "a2", "a", 2), b1, feedEvent(3, "a1", "a", 1)), batchOf(b2)}, []event.DeadLetter{big}},
		"unknown":      {append(good[:3:3], batchOf(feedEvent(7, "zz", "a", 9))), []event.DeadLetter{big}},
		"gap":          {[][]receiver.FeedEvent{batchOf(a1, b1, a2), batchOf(feedEvent(6, "b2", "b", 2))}, []event.DeadLetter{big}},
		"missing":      {[][]receiver.FeedEvent{batchOf(a1, b1, a2), batchOf(feedEvent(5, "a1", "a", 1))}, []event.DeadLetter{big}},
		"dead":         {good, []event.DeadLetter{big, deadOf("big", 0, event.ReasonTooLarge)}},
	}
	for kind, c := range bad {
		r := CheckBatches(pub, c.batches, c.dead, 3)
		if r.Pass() || len(r.Problems) != 1 || !strings.HasPrefix(r.Problems[0], kind+": ") {
			t.Errorf("%s: want one problem of that kind: %s", kind, r)
		}
	}
}

// TestBatchEndpointsAcrossFaults is issue #17's real-broker test of batch
// endpoints: "order holds across retries, 413 splits and a kill -9".
// Three `laneway serve` processes share the groups and topics; two batch
// endpoints' receivers verify every batch, answer 503 now and then and
// 413 above a body size (so full batches are split, and each endpoint's
// one oversized event is dead-lettered); a publisher per endpoint
// publishes facts through the instances' API. The instance running one
// endpoint's runner (the owner of its deliveries partition) is killed -9
// and restarted at once, then another is restarted gracefully. Every
// receiver must have accepted, or the endpoint dead-lettered, every
// published event, with the sequences first accepted rising across all
// batches and no gap, never two batches in flight at once and no batch
// above max_events (CheckBatches).
//
// It runs where the real services are, as TestFeedsAcrossFaults does,
// whose run it borrows (the extra flags go through the environment);
// LANEWAY_CHAOS_SEED sets the receivers' seed (logged).
func TestBatchEndpointsAcrossFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs laneway processes against the real broker")
	}
	b, ok := testenv.RealKafka()
	if !ok {
		t.Skipf("needs the real broker and Redis: %s and %s not set (run through scripts/testenv.sh test)", testenv.KafkaEnv, testenv.RedisEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	started := time.Now()
	r := startBatchRun(ctx, t, b)
	t.Logf("%d instances ready in %v", feedInstances, time.Since(started).Round(time.Millisecond))
	stopLoad := r.startLoad(ctx)
	r.waitProgress(ctx, "warm-up")
	r.publishOversized(ctx)
	r.waitProgress(ctx, "oversized events published")

	killed := r.owner(ctx, r.eps[0])
	r.fault(ctx, "kill -9", killed, func(in *Instance) error { return r.killHolding(ctx, in, r.eps[0]) })
	r.fault(ctx, "rolling restart", r.other(ctx, killed), func(in *Instance) error { return in.Stop(time.Minute) })

	stopLoad()
	r.drainAndCheck(ctx)
	t.Logf("done in %v", time.Since(started).Round(time.Millisecond))
}

// batchRun is the feed test's run with batch endpoints instead of feeds.
type batchRun struct {
	*feedRun
	seed uint64
	eps  []*batchEndpoint
}

// batchEndpoint is one batch endpoint of the run.
type batchEndpoint struct {
	id   string
	recv *fleet.BatchReceiver
	pub  *FeedPublisher
	big  FeedPublished // its oversized event, once published
}

// startBatchRun starts the instances with retries, the breaker and
// attempts scaled to the test and the receivers' loopback addresses
// allowed, and creates the endpoints.
func startBatchRun(ctx context.Context, t *testing.T, b testenv.Backend) *batchRun {
	for name, v := range map[string]string{
		"ALLOW_TARGETS": "127.0.0.0/8", "RETRY_BASE": "200ms", "RETRY_MAX": "2s", "ATTEMPT_TIMEOUT": "2s",
		"BREAKER_PAUSE": "2s", "BREAKER_MAX_PAUSE": "8s",
	} {
		t.Setenv("LANEWAY_"+name, v) // `laneway serve` reads every flag from its variable
	}
	r := &batchRun{feedRun: startFeedRun(ctx, t, b), seed: uint64(time.Now().UnixNano())}
	if s, err := strconv.ParseUint(os.Getenv("LANEWAY_CHAOS_SEED"), 10, 64); err == nil {
		r.seed = s
	}
	t.Logf("receivers' seed %d (LANEWAY_CHAOS_SEED=%[1]d gives the same 503s and holds)", r.seed)
	for i := range batchEndpoints {
		r.createEndpoint(ctx, i)
	}
	return r
}

// api is a client of instance addr's API, with the admin token.
func (r *batchRun) api(addr string) *client.Client {
	api, err := client.New(addr, r.token)
	if err != nil {
		r.t.Fatal(err)
	}
	return api
}

// createEndpoint creates batch endpoint i, its receiver and its
// publisher, and waits until every instance knows the endpoint (one that
// did not would fan its tenant's events out to nobody).
func (r *batchRun) createEndpoint(ctx context.Context, i int) {
	recv := fleet.NewBatchReceiver(fleet.BatchConfig{Limit: batchBodyLimit, FailRate: batchFailRate, Hold: batchHold, Seed: r.seed + uint64(i)})
	srv := httptest.NewServer(recv)
	r.t.Cleanup(srv.Close)
	tenant := fmt.Sprintf("%s-b%d", r.prefix, i)
	var ep struct{ ID, Secret string }
	r.admin(ctx, http.MethodPost, "/v1/endpoints", map[string]any{"tenant": tenant, "mode": "batch", "url": srv.URL,
		"batch": map[string]int{"max_events": batchMaxEvents, "max_wait_ms": batchMaxWaitMs}}, http.StatusCreated, &ep)
	recv.SetEndpoint(ep.ID, ep.Secret)
	for _, addr := range r.addrs {
		api := r.api(addr)
		if err := waitFor(ctx, batchLimit, "instance "+addr+" knowing endpoint "+ep.ID, func() bool {
			_, err := api.GetEndpoint(ctx, ep.ID)
			return err == nil
		}); err != nil {
			r.t.Fatal(err)
		}
	}
	pub := &FeedPublisher{Tenant: tenant, API: r.roundRobin, Facts: []string{"order:1", "order:2", "order:3", "order:4"}}
	r.eps, r.pubs = append(r.eps, &batchEndpoint{id: ep.ID, recv: recv, pub: pub}), append(r.pubs, pub)
}

// publishOversized publishes to each tenant one event whose item alone is
// above the receiver's limit: the batch holding it is halved down to it,
// and it is dead-lettered as payload_too_large.
func (r *batchRun) publishOversized(ctx context.Context) {
	r.t.Helper()
	for _, ep := range r.eps {
		big := FeedPublished{ID: ep.pub.Tenant + "-big", Entity: "big:1", Revision: 1}
		body := fmt.Sprintf(`{"id":%q,"type":"feed.test","tenant":%q,"entity":%q,"revision":1,"data":{"pad":%q}}`,
			big.ID, ep.pub.Tenant, big.Entity, strings.Repeat("x", batchBodyLimit))
		if _, err := ep.pub.API.PublishEvent(ctx, []byte(body), big.ID); err != nil {
			r.t.Fatalf("publishing %s: %v", big.ID, err)
		}
		ep.big = big
	}
}

// published is what was published to ep's tenant: the publisher's facts
// and the oversized event.
func (ep *batchEndpoint) published() []FeedPublished {
	pub := ep.pub.Published()
	if ep.big.ID != "" {
		pub = append(pub, ep.big)
	}
	return pub
}

// waitProgress waits until every receiver accepted batchProgress more
// events than when it was called: the pipeline carries load again.
func (r *batchRun) waitProgress(ctx context.Context, phase string) {
	r.t.Helper()
	from, start := r.accepted(), time.Now()
	err := waitFor(ctx, batchLimit, phase+": every receiver accepting on", func() bool {
		now := r.accepted()
		for i := range now {
			if now[i] < from[i]+batchProgress {
				return false
			}
		}
		return true
	})
	r.checkInstances()
	if err != nil {
		r.t.Fatalf("%v: accepted %v", err, r.accepted())
	}
	r.t.Logf("%s: every receiver accepted %d more in %v (totals %v)", phase, batchProgress, time.Since(start).Round(time.Millisecond), r.accepted())
}

func (r *batchRun) accepted() []int {
	out := make([]int, len(r.eps))
	for i, ep := range r.eps {
		out[i] = ep.recv.AcceptedIDs()
	}
	return out
}

// checkInstances fails the test if an instance exited by itself.
func (r *batchRun) checkInstances() {
	r.t.Helper()
	for _, in := range r.instances {
		if err := in.Exited(); err != nil {
			r.t.Fatal(err)
		}
	}
}

// owner is the instance that owns ep's deliveries partition: the one
// that appends to its backlog and runs its runner.
func (r *batchRun) owner(ctx context.Context, ep *batchEndpoint) *Instance {
	return r.feedRun.owner(ctx, &feedConsumer{endpointID: ep.id})
}

// other is the owner of the second endpoint when that is not not, else
// the next instance after not.
func (r *batchRun) other(ctx context.Context, not *Instance) *Instance {
	if in := r.owner(ctx, r.eps[1]); in != not {
		return in
	}
	for i, in := range r.instances {
		if in == not {
			return r.instances[(i+1)%len(r.instances)]
		}
	}
	return nil
}

// fault takes in down, starts it again at once, and waits until the
// groups are stable with every instance and the receivers accept on.
func (r *batchRun) fault(ctx context.Context, kind string, in *Instance, down func(*Instance) error) {
	r.t.Helper()
	start := time.Now()
	if err := errors.Join(down(in), in.Start(ctx)); err != nil {
		r.t.Fatalf("%s of %s: %v", kind, in.ID, err)
	}
	r.t.Logf("%s of %s: back in %v", kind, in.ID, time.Since(start).Round(time.Millisecond))
	if err := WaitGroups(ctx, r.adm, r.prefix, len(r.instances)); err != nil {
		r.t.Fatalf("%s: %v", kind, err)
	}
	r.waitProgress(ctx, kind)
}

// killHolding kills in -9 while ep's receiver holds a batch it accepted,
// its answer not sent: the runner's next owner sends that batch again.
func (r *batchRun) killHolding(ctx context.Context, in *Instance, ep *batchEndpoint) error {
	select {
	case <-ep.recv.Holding(): // left over
	default:
	}
	deadline := time.NewTimer(batchLimit)
	defer deadline.Stop()
	select {
	case <-ep.recv.Holding():
	case <-deadline.C:
		return fmt.Errorf("no batch of %s accepted within %v", ep.id, batchLimit)
	case <-ctx.Done():
		return ctx.Err()
	}
	return in.Kill()
}

// drainAndCheck waits until every published event is accepted or
// dead-lettered, then checks each endpoint's batches and receiver.
func (r *batchRun) drainAndCheck(ctx context.Context) {
	r.t.Helper()
	start := time.Now()
	var searched time.Time
	err := waitFor(ctx, 2*batchLimit, "every event accepted or dead-lettered", func() bool {
		if time.Since(searched) < batchDeadPoll {
			return false // the dead letters have no change feed: search them now and then
		}
		searched = time.Now()
		for _, ep := range r.eps {
			if CheckBatches(ep.published(), ep.recv.Accepted(), r.deadLetters(ctx, ep), batchMaxEvents).Missing > 0 {
				return false
			}
		}
		return true
	})
	r.checkInstances()
	for _, ep := range r.eps {
		r.checkEndpoint(ep, r.deadLetters(ctx, ep))
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Logf("drained in %v", time.Since(start).Round(time.Millisecond))
}

// checkEndpoint checks what ep's receiver accepted, its dead letters
// (its oversized event among them, payload_too_large with its sequence)
// and its receiver's counters.
func (r *batchRun) checkEndpoint(ep *batchEndpoint, dead []event.DeadLetter) {
	r.t.Helper()
	rep := CheckBatches(ep.published(), ep.recv.Accepted(), dead, batchMaxEvents)
	st := ep.recv.Stats()
	r.t.Logf("batch endpoint %s: %s\n  receiver: %+v", ep.id, rep, st)
	if !rep.Pass() {
		r.t.Errorf("batch endpoint %s failed the check", ep.id)
	}
	bigDead := false
	for _, l := range dead {
		bigDead = bigDead || l.Delivery != nil && l.Delivery.EventID == ep.big.ID && l.Reason == event.ReasonTooLarge && l.Delivery.Sequence > 0
	}
	switch {
	case !bigDead:
		r.t.Errorf("batch endpoint %s: its oversized event %s is not dead-lettered as %s with its sequence", ep.id, ep.big.ID, event.ReasonTooLarge)
	case st.Bad > 0 || st.Overlaps > 0 || st.Largest > batchMaxEvents:
		r.t.Errorf("batch endpoint %s: %d bad requests (%s), %d arrived with another in flight, a batch of %d events (max_events %d)",
			ep.id, st.Bad, st.BadDetail, st.Overlaps, st.Largest, batchMaxEvents)
	case st.Failed == 0:
		r.t.Errorf("batch endpoint %s: no batch failed: the retries went untested", ep.id)
	}
}

// deadLetters lists ep's dead letters (nil when the search failed: the
// drain searches again).
func (r *batchRun) deadLetters(ctx context.Context, ep *batchEndpoint) []event.DeadLetter {
	var out []event.DeadLetter
	api := r.api(r.addrs[0])
	cursor := ""
	for {
		q := url.Values{"endpoint_id": {ep.id}, "limit": {"100"}, "cursor": {cursor}}
		var page deadletter.Page
		if _, err := api.Call(ctx, http.MethodGet, "/v1/dead", q, nil, nil, &page); err != nil {
			r.t.Logf("searching %s's dead letters: %v", ep.id, err)
			return nil
		}
		for _, l := range page.Items {
			out = append(out, l.DeadLetter)
		}
		if cursor = page.Next; cursor == "" {
			return out
		}
	}
}
