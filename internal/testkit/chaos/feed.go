package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/receiver"
)

// feedRetryPause is how long a consumer or publisher waits before trying
// again after a failure: short, since the next instance is probably up.
const feedRetryPause = 50 * time.Millisecond

// RoundRobin is an http.RoundTripper that sends each request to the next
// of Addrs (host:port) whatever host its URL names, as a load balancer in
// front of Laneway's instances would: a client that retries a failed
// request reaches another instance.
type RoundRobin struct {
	Addrs []string
	Base  http.RoundTripper // default http.DefaultTransport

	next atomic.Uint64
}

// RoundTrip sends req to the next instance.
func (rr *RoundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.URL.Host = rr.Addrs[(rr.next.Add(1)-1)%uint64(len(rr.Addrs))]
	out.Host = ""
	base := rr.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(out)
}

// FeedPublished is an event a feed test published through the API.
type FeedPublished struct {
	ID       string
	Entity   string
	Revision int64
	// State is coalesce: true: a newer revision of its entity may
	// supersede it before delivery, so only an entity's newest state must
	// reach the feed.
	State bool
	// Ambiguous: the instance died with the request in flight, so nobody
	// knows whether Kafka took it; it may be missing.
	Ambiguous bool
}

// FeedPublisher publishes one tenant's events through the API, one
// request at a time, so that an entity's revisions reach Kafka in order.
// Each event carries its own id, and the same id as its Idempotency-Key:
// net/http may then replay it on a connection the server closed, and
// Laneway deduplicates a retry.
type FeedPublisher struct {
	Tenant string
	Facts  []string // entities that get facts (coalesce: false)
	States []string // entities that get states (coalesce: true)
	// API reaches the instances with the admin token, through a
	// RoundRobin (WithHTTPClient): a retry goes to the next one.
	API *client.Client

	n         int
	mu        sync.Mutex // guards published: the test reads it while publishing goes on
	published []FeedPublished
}

// PublishNext publishes the next event: the entities take turns, each
// one's revisions counting 1, 2, …. An instance that refuses the
// connection (down) or answers 5xx (the publish failed, its claim
// released) costs a retry; one that dies with the request in flight makes
// the event ambiguous, and the publisher moves on rather than wait out the
// idempotency claim the dead instance left.
func (p *FeedPublisher) PublishNext(ctx context.Context) error {
	entities := append(slices.Clone(p.Facts), p.States...)
	i := p.n % len(entities)
	ev := FeedPublished{ID: fmt.Sprintf("%s-ev%d", p.Tenant, p.n), Entity: entities[i],
		Revision: int64(p.n/len(entities)) + 1, State: i >= len(p.Facts)}
	p.n++
	body, _ := json.Marshal(map[string]any{"id": ev.ID, "type": "feed.test", "tenant": p.Tenant, "entity": ev.Entity,
		"revision": ev.Revision, "coalesce": ev.State, "data": map[string]any{"n": p.n}})
	for {
		_, err := p.API.PublishEvent(ctx, body, ev.ID)
		var ae *client.APIError
		answered := errors.As(err, &ae)
		switch {
		case err == nil:
			p.record(ev)
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, syscall.ECONNREFUSED), answered && ae.StatusCode >= 500:
			// Not taken: the same event again, on the next instance.
		case answered && ae.StatusCode == http.StatusConflict, !answered:
			// 409: an earlier try is still claimed by an instance that died
			// with it in flight (net/http replays a request with an
			// Idempotency-Key on a broken connection, so even a refused
			// connection may follow one that was taken). No answer at all:
			// the instance died mid-request.
			ev.Ambiguous = true
			p.record(ev)
			return nil
		default:
			return fmt.Errorf("publish %s: %w", ev.ID, err)
		}
		if !timing.Sleep(ctx, feedRetryPause) {
			return ctx.Err()
		}
	}
}

func (p *FeedPublisher) record(ev FeedPublished) {
	p.mu.Lock()
	p.published = append(p.published, ev)
	p.mu.Unlock()
}

// Published is every event published so far.
func (p *FeedPublisher) Published() []FeedPublished {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.published)
}

// FeedReport is what CheckFeed found in what one consumer read.
type FeedReport struct {
	Read       int // events read, duplicates included
	Duplicates int // events whose id had been read before
	Ambiguous  int // published events whose publish's outcome is unknown
	// Missing counts the published events that must have been read and
	// were not: every unambiguous fact, and each state entity's newest
	// unambiguous revision (or a newer one).
	Missing int
	// Problems lists the violations (at most a few of each kind):
	// sequences that skip or go back, ids nobody published, an entity's
	// revisions going back to an id not read before, missing events.
	Problems []string
}

// Pass is the verdict: nothing missing, no gap, nothing out of order.
func (r FeedReport) Pass() bool { return r.Missing == 0 && len(r.Problems) == 0 }

func (r FeedReport) String() string {
	s := fmt.Sprintf("%d read, %d duplicates, %d missing, %d ambiguous publishes", r.Read, r.Duplicates, r.Missing, r.Ambiguous)
	for _, p := range r.Problems {
		s += "\n  " + p
	}
	return s
}

// publishedByID indexes the published events by id and counts those whose
// publish had an unknown outcome.
func publishedByID(published []FeedPublished) (byID map[string]FeedPublished, ambiguous int) {
	byID = make(map[string]FeedPublished, len(published))
	for _, p := range published {
		byID[p.ID] = p
		if p.Ambiguous {
			ambiguous++
		}
	}
	return byID, ambiguous
}

// maxProblems caps each kind of problem a report lists.
const maxProblems = 5

// CheckFeed checks what a consumer read from sequence first on, in the
// order it read it, against what was published to its tenant:
// sequences rise by exactly one from page to page (facts are never
// compacted away, and states are not within the feed's hour of
// compaction lag); every event read was published; an entity's revision
// goes back only on a duplicate (a delivery appended again after a crash
// re-appends what the feed already holds); and nothing is lost.
func CheckFeed(first int64, published []FeedPublished, read []receiver.FeedEvent) FeedReport {
	var r FeedReport
	kinds := map[string]int{}
	problem := func(kind, format string, args ...any) {
		if kinds[kind]++; kinds[kind] <= maxProblems {
			r.Problems = append(r.Problems, kind+": "+fmt.Sprintf(format, args...))
		}
	}
	byID, ambiguous := publishedByID(published)
	r.Ambiguous += ambiguous
	seen := map[string]bool{}
	newest := map[string]int64{} // entity → highest revision read
	next := first
	for _, ev := range read {
		r.Read++
		if ev.Sequence != next {
			problem("sequence", "%d read where %d was next (%s)", ev.Sequence, next, ev.ID)
		}
		next = ev.Sequence + 1
		p, ok := byID[ev.ID]
		if !ok || p.Entity != ev.Entity.ID || p.Revision != ev.Entity.Revision {
			problem("unknown", "%s (%s revision %d) at %d was not published so", ev.ID, ev.Entity.ID, ev.Entity.Revision, ev.Sequence)
		}
		if seen[ev.ID] {
			r.Duplicates++
		} else if ev.Entity.Revision <= newest[ev.Entity.ID] {
			problem("order", "%s revision %d at %d, first read after revision %d", ev.Entity.ID, ev.Entity.Revision, ev.Sequence, newest[ev.Entity.ID])
		}
		seen[ev.ID] = true
		newest[ev.Entity.ID] = max(newest[ev.Entity.ID], ev.Entity.Revision)
	}
	missingFrom(&r, published, seen, newest, problem)
	return r
}

// missingFrom counts the events that should have been read and were not.
func missingFrom(r *FeedReport, published []FeedPublished, seen map[string]bool, newest map[string]int64, problem func(kind, format string, args ...any)) {
	wantState := map[string]int64{} // state entity → newest unambiguous revision
	for _, p := range published {
		switch {
		case p.Ambiguous:
		case p.State:
			wantState[p.Entity] = max(wantState[p.Entity], p.Revision)
		case !seen[p.ID]:
			r.Missing++
			problem("missing", "fact %s (%s revision %d) never read", p.ID, p.Entity, p.Revision)
		}
	}
	for entity, rev := range wantState {
		if newest[entity] < rev {
			r.Missing++
			problem("missing", "state %s: revision %d published, %d read at most", entity, rev, newest[entity])
		}
	}
}
