package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/testenv"
	"github.com/laneway/laneway/receiver"
)

// The feed test's scale: three tenants of one pull endpoint each, each
// publishing feedRate events/s over four fact entities and one state
// entity. The progress a phase waits for (feedProgress events read by
// every consumer) is four seconds of load.
const (
	feedInstances  = 3
	feedPartitions = 6
	feedRate       = 15
	feedProgress   = 60
	feedWait       = 5 * time.Second // a long poll; short, so that a graceful stop waits little for it
	feedPageLimit  = 100
	feedPhaseLimit = 30 * time.Second // for any one condition
)

func feedEvent(seq int64, id, entity string, rev int64) receiver.FeedEvent {
	return receiver.FeedEvent{Sequence: seq, ID: id, Entity: receiver.Entity{ID: entity, Revision: rev}}
}

// TestFeedCheck makes sure the feed checker fails what it must: a gap, a
// step back, an id nobody published, an entity going back to an unseen
// id, a lost fact, a state entity short of its newest revision; and lets
// pass duplicates of ids read before, ambiguous publishes and superseded
// states.
func TestFeedCheck(t *testing.T) {
	pub := []FeedPublished{
		{ID: "a1", Entity: "a", Revision: 1}, {ID: "a2", Entity: "a", Revision: 2},
		{ID: "s1", Entity: "s", Revision: 1, State: true}, {ID: "s2", Entity: "s", Revision: 2, State: true},
		{ID: "a3", Entity: "a", Revision: 3, Ambiguous: true},
	}
	good := []receiver.FeedEvent{feedEvent(0, "a1", "a", 1), feedEvent(1, "a2", "a", 2), feedEvent(2, "a1", "a", 1),
		feedEvent(3, "a2", "a", 2), feedEvent(4, "s2", "s", 2)}
	if r := CheckFeed(0, pub, good); !r.Pass() || r.Duplicates != 2 || r.Ambiguous != 1 {
		t.Fatalf("a good feed failed: %s", r)
	}
	bad := map[string]struct {
		first int64
		read  []receiver.FeedEvent
	}{
		"gap":       {0, []receiver.FeedEvent{feedEvent(0, "a1", "a", 1), feedEvent(2, "a2", "a", 2), feedEvent(3, "s2", "s", 2)}},
		"step back": {0, []receiver.FeedEvent{feedEvent(0, "a1", "a", 1), feedEvent(1, "a2", "a", 2), feedEvent(1, "s2", "s", 2)}},
		"start":     {5, good},
		"unknown":   {0, append(good[:5:5], feedEvent(5, "zz", "a", 9))},
		"backwards": {0, []receiver.FeedEvent{feedEvent(0, "a2", "a", 2), feedEvent(1, "a1", "a", 1), feedEvent(2, "s2", "s", 2)}},
		"lost fact": {0, []receiver.FeedEvent{feedEvent(0, "a1", "a", 1), feedEvent(1, "s2", "s", 2)}},
		"old state": {0, []receiver.FeedEvent{feedEvent(0, "a1", "a", 1), feedEvent(1, "a2", "a", 2), feedEvent(2, "s1", "s", 1)}},
	}
	for name, c := range bad {
		if r := CheckFeed(c.first, pub, c.read); r.Pass() {
			t.Errorf("%s: passed: %s", name, r)
		}
	}
}

// TestFeedPublisherAnswers: PublishNext sends the event with the admin
// token and its id as the Idempotency-Key, tries again after a refused
// connection or a 5xx, records it on a 202, records it ambiguous on a 409
// or when the instance hangs up, and fails on any other status.
func TestFeedPublisherAnswers(t *testing.T) {
	var mu sync.Mutex
	answers := []int{http.StatusServiceUnavailable, http.StatusAccepted, http.StatusConflict, 0, http.StatusUnprocessableEntity}
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		got = append(got, fmt.Sprintf("%s %s %s|%s|%s", r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), ev.ID))
		code := answers[0]
		answers = answers[1:]
		mu.Unlock()
		if code == 0 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
			return
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"id":"x","error":"e"}`))
	}))
	defer srv.Close()
	down, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	// Every other request goes to an address nobody listens on. No
	// keep-alive: net/http would replay a request with an Idempotency-Key
	// that a reused connection lost, which would hide the hang-up.
	rr := &RoundRobin{Addrs: []string{down, srv.Listener.Addr().String()}, Base: &http.Transport{DisableKeepAlives: true}}
	api, err := client.New("http://laneway", "tok", client.WithHTTPClient(&http.Client{Timeout: 10 * time.Second, Transport: rr}))
	if err != nil {
		t.Fatal(err)
	}
	p := &FeedPublisher{Tenant: "t", Facts: []string{"f"}, API: api}
	ctx := context.Background()
	for range 3 {
		if err := p.PublishNext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.PublishNext(ctx); err == nil || !strings.Contains(err.Error(), "publish t-ev3: API 422") {
		t.Fatalf("PublishNext on a 422 = %v", err)
	}
	want := []FeedPublished{{ID: "t-ev0", Entity: "f", Revision: 1}, {ID: "t-ev1", Entity: "f", Revision: 2, Ambiguous: true},
		{ID: "t-ev2", Entity: "f", Revision: 3, Ambiguous: true}}
	if pub := p.Published(); !slices.Equal(pub, want) {
		t.Errorf("published %+v, want %+v", pub, want)
	}
	var wantGot []string
	for _, id := range []string{"t-ev0", "t-ev0", "t-ev1", "t-ev2", "t-ev3"} {
		wantGot = append(wantGot, "POST /v1/events Bearer tok|"+id+"|"+id)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, wantGot) {
		t.Errorf("requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantGot, "\n"))
	}
}

// TestFeedsAcrossFaults is issue #17's real-broker test: three `laneway
// serve` processes share the groups and topics; three consumers
// long-poll their pull endpoints' feeds round-robin over the instances
// while a publisher per tenant publishes through the instances' API; one
// instance is restarted gracefully (a rebalance), another is killed -9
// and restarted at once. Each consumer must read sequences rising by one
// with no gap, every published fact (and each state entity's newest
// revision: older states may be superseded before delivery), and an
// entity's revisions going back only to ids it read before (a delivery
// re-appended after the kill). Then each consumer acknowledges a cursor
// halfway, all three instances are stopped and started again, and a read
// without a cursor must resume exactly there.
//
// It runs where the real services are (LANEWAY_TEST_KAFKA_BROKERS and
// LANEWAY_TEST_REDIS_URL, as scripts/testenv.sh test sets them), on the
// shared broker under a prefix of its own; LANEWAY_CHAOS_BIN runs that
// laneway binary instead of building ./cmd/laneway.
func TestFeedsAcrossFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs laneway processes against the real broker")
	}
	b, ok := testenv.RealKafka()
	if !ok {
		t.Skipf("needs the real broker and Redis: %s and %s not set (run through scripts/testenv.sh test)", testenv.KafkaEnv, testenv.RedisEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	started := time.Now()
	r := startFeedRun(ctx, t, b)
	t.Logf("%d instances ready in %v", feedInstances, time.Since(started).Round(time.Millisecond))
	r.createFeeds(ctx)
	stopLoad := r.startLoad(ctx)
	r.waitProgress(ctx, "warm-up")

	// Each fault hits the instance that appends one of the feeds.
	r.fault(ctx, "rolling restart", r.feeds[0], func(in *Instance) error { return in.Stop(time.Minute) })
	r.fault(ctx, "kill -9", r.feeds[1], (*Instance).Kill)

	stopLoad()
	r.drainAndCheck(ctx)
	r.resumeAfterFullRestart(ctx)
	t.Logf("done in %v", time.Since(started).Round(time.Millisecond))
}

// feedRun is the running test: its instances, endpoints, publishers and
// consumers.
type feedRun struct {
	t         *testing.T
	prefix    string // of the run's topics and groups
	token     string // admin token
	instances []*Instance
	addrs     []string
	adm       *kadm.Client
	http      *http.Client // to one instance
	// roundRobin is the admin API through the instances in turn, as
	// behind a load balancer.
	roundRobin *client.Client
	feeds      []*feedConsumer
	pubs       []*FeedPublisher
	pubErrs    chan error
}

// startFeedRun builds laneway and starts the instances; cleanup stops
// them and deletes the run's topics and groups from the shared broker.
func startFeedRun(ctx context.Context, t *testing.T, b testenv.Backend) *feedRun {
	dir := t.TempDir()
	bin := os.Getenv("LANEWAY_CHAOS_BIN")
	if bin == "" {
		root, err := filepath.Abs("../../..")
		if err != nil {
			t.Fatal(err)
		}
		built := time.Now()
		if bin, err = BuildLaneway(ctx, root, dir); err != nil {
			t.Fatal(err)
		}
		t.Logf("laneway built in %v", time.Since(built).Round(time.Millisecond))
	}
	keyFile := filepath.Join(dir, "secrets.key")
	if _, _, err := secretbox.EnsureKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	r := &feedRun{t: t, prefix: "feedchaos-" + randomSuffix(), token: "feed-chaos-admin-token-" + randomSuffix() + randomSuffix() + randomSuffix(),
		http: &http.Client{Timeout: 40 * time.Second}, pubErrs: make(chan error, 8)}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	r.adm = kadm.NewClient(cl)
	t.Cleanup(func() { r.cleanup(dir); cl.Close() })
	for i := range feedInstances {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("%s-%d", r.prefix, i)
		in := &Instance{ID: id, Addr: addr, bin: bin, logPath: filepath.Join(dir, fmt.Sprintf("laneway-%d.log", i)), args: []string{"serve",
			"--kafka-brokers", strings.Join(b.Brokers, ","), "--redis-url", b.RedisURL, "--http-addr", addr, "--instance-id", id,
			"--topic-prefix", r.prefix, "--group-prefix", r.prefix, "--partitions", fmt.Sprint(feedPartitions), "--secrets-key-file", keyFile,
			"--admin-token", r.token, "--session-timeout", "6s", "--commit-interval", "200ms", "--log-level", "info", "--log-format", "json"}}
		r.instances, r.addrs = append(r.instances, in), append(r.addrs, addr)
	}
	r.roundRobin, err = client.New("http://laneway", r.token,
		client.WithHTTPClient(&http.Client{Timeout: 40 * time.Second, Transport: &RoundRobin{Addrs: r.addrs}}))
	if err != nil {
		t.Fatal(err)
	}
	r.startAll(ctx)
	return r
}

// startAll starts the first instance (it creates the topics on a first
// start), then the others together, and waits until the groups are
// stable with all of them.
func (r *feedRun) startAll(ctx context.Context) {
	if err := r.instances[0].Start(ctx); err != nil {
		r.t.Fatal(err)
	}
	errs := make([]error, len(r.instances))
	var wg sync.WaitGroup
	for i, in := range r.instances[1:] {
		wg.Go(func() { errs[i] = in.Start(ctx) })
	}
	wg.Wait()
	if err := joinErrs(errs...); err != nil {
		r.t.Fatal(err)
	}
	if err := WaitGroups(ctx, r.adm, r.prefix, len(r.instances)); err != nil {
		r.t.Fatal(err)
	}
}

// cleanup kills what still runs, keeps the logs of a failed run and
// deletes the run's topics and groups.
func (r *feedRun) cleanup(dir string) {
	for _, in := range r.instances {
		_ = in.Kill()
	}
	if r.t.Failed() {
		if keep, err := os.MkdirTemp("", "laneway-feed-chaos-"); err == nil && os.CopyFS(keep, os.DirFS(dir)) == nil {
			r.t.Logf("laneway logs kept in %s", keep)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if listed, err := r.adm.ListTopics(ctx); err == nil {
		var mine []string
		for _, name := range listed.Names() {
			if strings.HasPrefix(name, r.prefix+".") {
				mine = append(mine, name)
			}
		}
		_, _ = r.adm.DeleteTopics(ctx, mine...)
	}
	_, _ = r.adm.DeleteGroups(ctx, topics.GroupsFor(r.prefix).All()...)
}

// admin calls the admin API of the first instance.
func (r *feedRun) admin(ctx context.Context, method, path string, body any, want int, out any) {
	r.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, method, "http://"+r.addrs[0]+path, strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		r.t.Fatalf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			r.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// createFeeds creates a pull endpoint and a consumer token per tenant and
// waits until every instance serves each feed to its token (an instance
// that did not know an endpoint would fan its events out to nobody).
func (r *feedRun) createFeeds(ctx context.Context) {
	for i := range feedInstances {
		tenant := fmt.Sprintf("%s-t%d", r.prefix, i)
		var ep, tok struct{ ID, Token string }
		r.admin(ctx, http.MethodPost, "/v1/endpoints", map[string]string{"tenant": tenant, "mode": "pull"}, http.StatusCreated, &ep)
		r.admin(ctx, http.MethodPost, "/v1/endpoints/"+ep.ID+"/feed-tokens", nil, http.StatusCreated, &tok)
		r.feeds = append(r.feeds, &feedConsumer{endpointID: ep.ID, token: tok.Token, feed: r.newFeed(ep.ID, tok.Token, "", r.addrs...)})
		r.pubs = append(r.pubs, &FeedPublisher{Tenant: tenant, API: r.roundRobin,
			Facts: []string{"order:1", "order:2", "order:3", "order:4"}, States: []string{"cart:1"}})
		for _, addr := range r.addrs {
			one := r.newFeed(ep.ID, tok.Token, "", addr)
			var last error
			if err := waitFor(ctx, feedPhaseLimit, "instance "+addr+" serving feed "+ep.ID, func() bool {
				_, last = one.Fetch(ctx, "", 0)
				return last == nil
			}); err != nil {
				r.t.Fatalf("%v (last: %v)", err, last)
			}
		}
	}
}

// newFeed is a consumer of endpoint id's feed that reaches addrs in
// turn, as through a load balancer, and retries a failure after a short
// pause (on the next instance). It does not acknowledge: the test does,
// once, where it chooses.
func (r *feedRun) newFeed(id, token, cursor string, addrs ...string) *receiver.Feed {
	f, err := receiver.NewFeed(receiver.FeedConfig{BaseURL: "http://laneway", EndpointID: id, Token: token,
		HTTPClient: &http.Client{Transport: &RoundRobin{Addrs: addrs}}, Limit: feedPageLimit, Wait: feedWait,
		Cursor: cursor, NoAck: true, BackoffMin: feedRetryPause, BackoffMax: 4 * feedRetryPause})
	if err != nil {
		r.t.Fatal(err)
	}
	return f
}

// startLoad starts the publishers (paced by a ticker) and the consumers;
// the returned func stops the publishers and waits for them.
func (r *feedRun) startLoad(ctx context.Context) (stop func()) {
	for _, f := range r.feeds {
		f.start(ctx)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range r.pubs {
		wg.Go(func() {
			tick := time.NewTicker(time.Second / feedRate)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				if err := p.PublishNext(ctx); err != nil {
					r.pubErrs <- err
					return
				}
			}
		})
	}
	return func() {
		close(done)
		wg.Wait()
		for _, p := range r.pubs {
			pub := p.Published()
			r.t.Logf("tenant %s: %d events published, %d ambiguous", p.Tenant, len(pub), countAmbiguous(pub))
		}
		select {
		case err := <-r.pubErrs:
			r.t.Fatalf("publisher: %v", err)
		default:
		}
	}
}

func countAmbiguous(pub []FeedPublished) int {
	n := 0
	for _, p := range pub {
		if p.Ambiguous {
			n++
		}
	}
	return n
}

// waitProgress waits until every consumer has read feedProgress more
// events than when it was called: the pipeline carries load again.
func (r *feedRun) waitProgress(ctx context.Context, phase string) {
	r.t.Helper()
	from := make([]int, len(r.feeds))
	for i, f := range r.feeds {
		from[i] = f.count()
	}
	start := time.Now()
	err := waitFor(ctx, feedPhaseLimit, phase+": every consumer reading on", func() bool {
		for i, f := range r.feeds {
			if f.failed() != nil || f.count() < from[i]+feedProgress {
				return false
			}
		}
		return true
	})
	r.checkConsumers()
	if err != nil {
		r.t.Fatalf("%v: read %v since", err, r.counts())
	}
	r.t.Logf("%s: every consumer read %d more in %v (totals %v)", phase, feedProgress, time.Since(start).Round(time.Millisecond), r.counts())
}

func (r *feedRun) counts() []int {
	out := make([]int, len(r.feeds))
	for i, f := range r.feeds {
		out[i] = f.count()
	}
	return out
}

func (r *feedRun) checkConsumers() {
	r.t.Helper()
	for _, f := range r.feeds {
		if err := f.failed(); err != nil {
			r.t.Fatalf("consumer of %s: %v", f.endpointID, err)
		}
	}
}

// fault takes down the instance that owns the deliveries partition of
// feed f (its writer) with down, starts it again at once, and waits until
// the groups are stable with every instance and the consumers read on.
func (r *feedRun) fault(ctx context.Context, kind string, f *feedConsumer, down func(*Instance) error) {
	r.t.Helper()
	in := r.owner(ctx, f)
	start := time.Now()
	if err := down(in); err != nil {
		r.t.Fatalf("%s of %s: %v", kind, in.ID, err)
	}
	if err := in.Start(ctx); err != nil {
		r.t.Fatalf("%s: restart: %v", kind, err)
	}
	r.t.Logf("%s of %s: back in %v", kind, in.ID, time.Since(start).Round(time.Millisecond))
	if err := WaitGroups(ctx, r.adm, r.prefix, len(r.instances)); err != nil {
		r.t.Fatalf("%s: %v", kind, err)
	}
	r.waitProgress(ctx, kind)
}

// owner is the instance that owns the deliveries partition of f's endpoint.
func (r *feedRun) owner(ctx context.Context, f *feedConsumer) *Instance {
	r.t.Helper()
	id, p, err := DeliveriesOwner(ctx, r.adm, r.prefix, feedPartitions, f.endpointID)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, in := range r.instances {
		if in.ID == id {
			r.t.Logf("%s appends feed %s (deliveries partition %d)", id, f.endpointID, p)
			return in
		}
	}
	r.t.Fatalf("deliveries partition %d is owned by %s, none of the test's instances", p, id)
	return nil
}

// drainAndCheck waits until every consumer has read everything it must,
// stops them and checks what each read.
func (r *feedRun) drainAndCheck(ctx context.Context) {
	r.t.Helper()
	start := time.Now()
	err := waitFor(ctx, 2*feedPhaseLimit, "every consumer to read every event", func() bool {
		for i, f := range r.feeds {
			if f.failed() != nil || CheckFeed(0, r.pubs[i].Published(), f.events()).Missing > 0 {
				return false
			}
		}
		return true
	})
	for _, f := range r.feeds {
		f.stop()
	}
	r.checkConsumers()
	for i, f := range r.feeds {
		rep := CheckFeed(0, r.pubs[i].Published(), f.events())
		r.t.Logf("feed %s: %s", f.endpointID, rep)
		if !rep.Pass() {
			r.t.Errorf("feed %s failed the check", f.endpointID)
		}
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Logf("drained in %v", time.Since(start).Round(time.Millisecond))
	if r.t.Failed() {
		r.t.FailNow()
	}
}

// resumeAfterFullRestart acknowledges a cursor halfway through each feed,
// restarts every instance, and reads each feed without a cursor: it must
// start exactly at the acknowledged position and give the same events as
// before (a feed's log does not change under it).
func (r *feedRun) resumeAfterFullRestart(ctx context.Context) {
	r.t.Helper()
	acked := make([]int64, len(r.feeds))
	for i, f := range r.feeds {
		m := f.halfway()
		if err := f.feed.Ack(ctx, m.cursor); err != nil {
			r.t.Fatalf("ack %s: %v", m.cursor, err)
		}
		acked[i] = m.sequence
	}
	start := time.Now()
	errs := make([]error, len(r.instances))
	var wg sync.WaitGroup
	for i, in := range r.instances {
		wg.Go(func() { errs[i] = in.Stop(time.Minute) })
	}
	wg.Wait()
	if err := joinErrs(errs...); err != nil {
		r.t.Fatalf("stopping every instance: %v", err)
	}
	r.startAll(ctx)
	r.t.Logf("every instance stopped and started again in %v", time.Since(start).Round(time.Millisecond))
	for i, f := range r.feeds {
		r.checkResume(ctx, f, acked[i])
	}
}

// checkResume reads f's feed from no cursor to the end of what it read
// before, with a new consumer.
func (r *feedRun) checkResume(ctx context.Context, f *feedConsumer, acked int64) {
	r.t.Helper()
	before := f.events()
	end := before[len(before)-1].Sequence + 1
	ctx, cancel := context.WithTimeout(ctx, feedPhaseLimit)
	defer cancel()
	next := acked
	for ev, err := range r.newFeed(f.endpointID, f.token, "", r.addrs...).Events(ctx) {
		if err != nil {
			r.t.Fatalf("feed %s after the restart, at %d of %d: %v", f.endpointID, next, end, err)
		}
		if ev.Sequence != next || ev.ID != before[next].ID {
			r.t.Fatalf("feed %s after the restart: %s at %d where %s at %d was due (acknowledged %d)",
				f.endpointID, ev.ID, ev.Sequence, before[next].ID, next, acked)
		}
		if next++; next == end {
			break
		}
	}
	r.t.Logf("feed %s resumed at its acknowledged sequence %d and read on to %d", f.endpointID, acked, end)
}

// feedConsumer follows one feed from its start, keeping what it read.
type feedConsumer struct {
	endpointID, token string
	feed              *receiver.Feed
	cancel            context.CancelFunc
	done              chan struct{} // closed when run returns

	mu    sync.Mutex
	read  []receiver.FeedEvent
	marks []feedMark
	err   error
}

// feedMark is a cursor a page was read from and the sequence it points at.
type feedMark struct {
	cursor   string
	sequence int64
}

// start follows the feed in a goroutine of its own until stop.
func (f *feedConsumer) start(ctx context.Context) {
	ctx, f.cancel = context.WithCancel(ctx)
	f.done = make(chan struct{})
	go f.run(ctx)
}

// run keeps every event, and the cursor of each page (Feed.Cursor moves
// past a page once all of its events are handled).
func (f *feedConsumer) run(ctx context.Context) {
	defer close(f.done)
	last := ""
	err := f.feed.Run(ctx, func(_ context.Context, ev receiver.FeedEvent) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if c := f.feed.Cursor(); c != last && c != "" {
			f.marks, last = append(f.marks, feedMark{cursor: c, sequence: ev.Sequence}), c
		}
		f.read = append(f.read, ev)
		return nil
	})
	if ctx.Err() == nil {
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
	}
}

func (f *feedConsumer) stop() {
	f.cancel()
	<-f.done
}

func (f *feedConsumer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.read)
}

func (f *feedConsumer) events() []receiver.FeedEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.read)
}

func (f *feedConsumer) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// halfway is the first page boundary from the middle of what was read on.
func (f *feedConsumer) halfway() feedMark {
	f.mu.Lock()
	defer f.mu.Unlock()
	mid := int64(len(f.read) / 2)
	for _, m := range f.marks {
		if m.sequence >= mid {
			return m
		}
	}
	return f.marks[len(f.marks)-1]
}
