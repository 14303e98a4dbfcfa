package api

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/kafka/logscan"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/ops/deadletter"
	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/ops/jobs/jobrecord"
)

type fakeDead struct {
	mu      sync.Mutex
	filter  deadletter.Filter
	cursor  string
	limit   int
	jobs    map[string]deadletter.Job
	submits int
}

func (f *fakeDead) Find(_ context.Context, filter deadletter.Filter, cursor string, limit int) (deadletter.Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filter, f.cursor, f.limit = filter, cursor, limit
	if cursor == "bad" {
		return deadletter.Page{}, logscan.ErrBadCursor
	}
	l := deadletter.Letter{DeadLetter: event.DeadLetter{ID: "ev1:ep_1", Reason: event.ReasonGone, EndpointID: "ep_1"}, Partition: 2, Offset: 7}
	return deadletter.Page{Items: []deadletter.Letter{l}, Next: "next"}, nil
}

func (f *fakeDead) Submit(_ context.Context, req deadletter.Request, key string) (deadletter.Job, bool, error) {
	if err := deadletter.Validate(req); err != nil {
		return deadletter.Job{}, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id := "rd_" + req.EndpointID + key
	if j, ok := f.jobs[id]; ok {
		return j, false, nil
	}
	f.submits++
	j := deadletter.Job{Head: jobrecord.Head[deadletter.Request]{ID: id, Status: jobs.StatusRunning, Request: req}, Tail: jobrecord.Tail{Cursor: "secret-cursor"}}
	f.jobs[id] = j
	return j, true, nil
}

func (f *fakeDead) Get(_ context.Context, id string) (deadletter.Job, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	return j, ok, nil
}

func deadHarness(t *testing.T) (*harness, *fakeDead) {
	fd := &fakeDead{jobs: map[string]deadletter.Job{}}
	h := newHarness(t, func(c *Config) { c.DeadLetters, c.Redrives = fd, fd })
	return h, fd
}

func TestListDeadPassesFiltersAndPages(t *testing.T) {
	h, fd := deadHarness(t)
	r := h.do("GET", "/v1/dead?endpoint_id=ep_1&reason=gone&since=2026-03-01T00:00:00Z&until=2026-03-02T00:00:00Z&limit=5", "")
	wantStatus(t, r, http.StatusOK)
	got := r.json(t)
	if got["next_cursor"] != "next" || len(got["data"].([]any)) != 1 {
		t.Fatalf("page %v", got)
	}
	if fd.filter.EndpointID != "ep_1" || fd.filter.Reason != "gone" || fd.limit != 5 ||
		!fd.filter.Since.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) || !fd.filter.Until.Equal(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("filter %+v limit %d", fd.filter, fd.limit)
	}
	for _, q := range []string{"since=yesterday", "until=1", "limit=0", "limit=5000", "cursor=bad"} {
		wantStatus(t, h.do("GET", "/v1/dead?"+q, ""), http.StatusBadRequest)
	}
}

func TestRedriveStartsOnceAndReportsProgress(t *testing.T) {
	h, fd := deadHarness(t)
	createEndpoint(t, h)
	r := h.do("POST", "/v1/dead/redrive", `{"endpoint_id":"ep_1"}`)
	wantStatus(t, r, http.StatusAccepted)
	if r.header.Get("Location") != "/v1/redrives/rd_ep_1" || r.json(t)["cursor"] != nil {
		t.Fatalf("location %q, body %s (the cursor must stay internal)", r.header.Get("Location"), r.body)
	}
	wantStatus(t, h.do("POST", "/v1/dead/redrive", `{"endpoint_id":"ep_1"}`), http.StatusOK)
	if fd.submits != 1 {
		t.Fatalf("%d jobs started for one request sent twice", fd.submits)
	}
	r = h.do("GET", "/v1/redrives/rd_ep_1", "")
	wantStatus(t, r, http.StatusOK)
	if r.json(t)["status"] != "running" {
		t.Fatalf("progress %s", r.body)
	}
	wantStatus(t, h.do("GET", "/v1/redrives/rd_nope", ""), http.StatusNotFound)

	// A refused request is answered with why, in the message and alone.
	r = h.do("POST", "/v1/dead/redrive", `{}`)
	wantStatus(t, r, http.StatusBadRequest)
	const why = "give ids, or endpoint_id with an optional since/until"
	if got := r.json(t); got["error"] != "invalid redrive request: "+why || got["reason"] != why {
		t.Fatalf("refusal %s", r.body)
	}
}

func TestRedriveRefusals(t *testing.T) {
	h, _ := deadHarness(t)
	e := createEndpoint(t, h)
	wantStatus(t, h.do("POST", "/v1/dead/redrive", `{}`), http.StatusBadRequest)
	wantStatus(t, h.do("POST", "/v1/dead/redrive", `{"ids":["a:b"],"endpoint_id":"ep_1"}`), http.StatusBadRequest)
	wantStatus(t, h.do("POST", "/v1/dead/redrive", `{"endpoint_id":"ep_missing"}`), http.StatusNotFound)
	e.Status = endpoint.StatusDisabled
	if err := h.store.Put(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.do("POST", "/v1/dead/redrive", `{"endpoint_id":"ep_1"}`), http.StatusConflict)
}

func TestDeadRoutesWithoutBackends(t *testing.T) {
	h := newHarness(t, nil)
	wantStatus(t, h.do("GET", "/v1/dead", ""), http.StatusNotImplemented)
	wantStatus(t, h.do("POST", "/v1/dead/redrive", `{"ids":["a:b"]}`), http.StatusNotImplemented)
}
