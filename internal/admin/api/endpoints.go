package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/laneway/laneway/internal/admin/wire"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

// toJSON is e as the API shows it: a wire.Endpoint, separate from
// endpoint.Endpoint so that secrets appear only in the create response and
// every field is always present.
func toJSON(e endpoint.Endpoint) wire.Endpoint {
	types := e.EventTypes
	if types == nil {
		types = []string{} // [] rather than null: "every type" reads the same either way
	}
	payload := e.Payload
	if payload == "" {
		payload = endpoint.PayloadFull
	}
	mode := e.Mode
	if mode == "" {
		mode = endpoint.ModePush
	}
	out := wire.Endpoint{
		ID: e.ID, Tenant: e.Tenant, URL: e.URL, EventTypes: types,
		MaxConcurrency: e.MaxConcurrency, Payload: payload, Mode: mode, Status: e.Status, Paused: e.Paused,
		DisabledReason: e.DisabledReason, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}
	if e.Batched() {
		maxEvents, maxBytes, maxWait := e.Batch.Sizes()
		out.Batch = &wire.BatchConfig{MaxEvents: maxEvents, MaxBytes: maxBytes, MaxWaitMS: maxWait.Milliseconds()}
	}
	return out
}

// createRequest is the body of POST /v1/endpoints. Pointers tell an absent
// field (take the default) from a given one (validate it).
type createRequest struct {
	Tenant         string   `json:"tenant"`
	URL            string   `json:"url"`
	EventTypes     []string `json:"event_types"`
	MaxConcurrency *int     `json:"max_concurrency"`
	Payload        string   `json:"payload"`
	Mode           string   `json:"mode"`
	Secret         *string  `json:"secret"`
	// Batch is decoded by parseBatch, which names its fields batch.*;
	// absent or null takes the defaults.
	Batch json.RawMessage `json:"batch"`
}

func (c *createRequest) endpoint(id string, now time.Time) (endpoint.Endpoint, error) {
	e := endpoint.Endpoint{
		ID: id, Tenant: c.Tenant, URL: c.URL, EventTypes: c.EventTypes, Payload: c.Payload, Mode: c.Mode,
		MaxConcurrency: endpoint.DefaultMaxConcurrency, Status: endpoint.StatusActive,
		CreatedAt: now, UpdatedAt: now,
	}
	if c.MaxConcurrency != nil {
		e.MaxConcurrency = *c.MaxConcurrency
	}
	secret := endpoint.NewSecret()
	if c.Secret != nil {
		secret = *c.Secret // checked with endpoint.ValidateSecret by Validate
	}
	e.Secrets = []endpoint.Secret{{Value: secret}}
	if len(c.Batch) > 0 && string(c.Batch) != "null" {
		b, err := parseBatch(c.Batch)
		if err != nil {
			return e, err
		}
		if e.Batch, err = b.apply(nil); err != nil {
			return e, err
		}
	}
	return e, nil
}

// batchRequest is the batch object of a create or PATCH body. Pointers
// tell an absent size (the default on create, unchanged on PATCH) from a
// given one.
type batchRequest struct {
	MaxEvents *int   `json:"max_events"`
	MaxBytes  *int   `json:"max_bytes"`
	MaxWaitMS *int64 `json:"max_wait_ms"`
}

// parseBatch decodes a batch object strictly, naming the field at fault
// batch.<name> (or batch when it is not an object).
func parseBatch(raw json.RawMessage) (batchRequest, error) {
	var b batchRequest
	err := httpjson.DecodeStrict(raw, &b)
	if err == nil {
		return b, nil
	}
	var fe *httpjson.FieldError
	switch {
	case !errors.As(err, &fe):
		return b, &httpjson.FieldError{Field: "batch", Reason: err.Error()}
	case fe.Field == "body":
		return b, &httpjson.FieldError{Field: "batch", Reason: "must be a JSON object"}
	}
	return b, &httpjson.FieldError{Field: "batch." + fe.Field, Reason: fe.Reason}
}

// apply returns a copy of c (nil: no sizes yet) with the given sizes set;
// c itself, shared with the store, is left alone. A stored 0 reads as the
// default, so a given max_events or max_bytes of 0 is refused, and a
// max_wait_ms of 0 (do not wait) is stored as 1. Endpoint.Validate checks
// the ranges.
func (b batchRequest) apply(c *endpoint.BatchConfig) (*endpoint.BatchConfig, error) {
	var out endpoint.BatchConfig
	if c != nil {
		out = *c
	}
	if b.MaxEvents != nil {
		if *b.MaxEvents == 0 {
			return nil, &endpoint.ValidationError{Field: "batch.max_events", Reason: fmt.Sprintf("must be between 1 and %d", endpoint.MaxBatchEvents)}
		}
		out.MaxEvents = *b.MaxEvents
	}
	if b.MaxBytes != nil {
		if *b.MaxBytes == 0 {
			return nil, &endpoint.ValidationError{Field: "batch.max_bytes", Reason: fmt.Sprintf("must be between %d and %d", endpoint.MinBatchBytes, endpoint.MaxBatchBytes)}
		}
		out.MaxBytes = *b.MaxBytes
	}
	if b.MaxWaitMS != nil {
		out.MaxWaitMS = *b.MaxWaitMS
		if out.MaxWaitMS == 0 {
			out.MaxWaitMS = 1 // do not wait; a stored 0 would read as the default
		}
	}
	return &out, nil
}

func (s *Server) createEndpoint(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if !httpjson.ReadStrict(w, r, s.maxBody, &req) {
		return
	}
	e, err := req.endpoint("ep_"+s.newID(), s.now().UTC())
	if err == nil {
		err = e.Validate()
	}
	if err != nil {
		httpjson.Invalid(w, err)
		return
	}
	if e.Ordered() && !s.createFeed(w, r, e) {
		return
	}
	if _, exists := s.endpoints.Get(e.ID); exists {
		// Put would silently replace another endpoint; only a broken NewID
		// can get here.
		httpjson.Error(w, http.StatusInternalServerError, "generated endpoint id is already in use")
		return
	}
	if !s.put(w, r, e) {
		return
	}
	out := toJSON(e)
	out.Secret = e.Secrets[0].Value // shown once: the client must keep it
	w.Header().Set("Location", "/v1/endpoints/"+e.ID)
	httpjson.Write(w, http.StatusCreated, out)
}

// createFeed makes the feed topic of a new pull or batch endpoint before
// the endpoint is stored: a pull endpoint's consumer can read (an empty
// feed) at once, and a batch endpoint's deliveries pass through it.
func (s *Server) createFeed(w http.ResponseWriter, r *http.Request, e endpoint.Endpoint) bool {
	if s.feeds == nil {
		httpjson.Error(w, http.StatusNotImplemented, "this instance serves no feeds, so it cannot create pull or batch endpoints")
		return false
	}
	if err := s.feeds.Create(r.Context(), e); err != nil {
		s.logger.ErrorContext(r.Context(), "api: creating a feed failed", "endpoint_id", e.ID, "error", err)
		httpjson.Error(w, http.StatusServiceUnavailable, "could not create the endpoint's feed, retry")
		return false
	}
	return true
}

// put stores e, answering 503 itself when the store fails.
func (s *Server) put(w http.ResponseWriter, r *http.Request, e endpoint.Endpoint) bool {
	if err := s.endpoints.Put(r.Context(), e); err != nil {
		s.logger.ErrorContext(r.Context(), "api: storing endpoint failed", "endpoint_id", e.ID, "error", err)
		httpjson.Error(w, http.StatusServiceUnavailable, "could not store the endpoint, retry: "+err.Error())
		return false
	}
	return true
}

// listEndpoints answers GET /v1/endpoints?tenant=&sort=id|oldest_pending_age&limit=,
// each endpoint with its health; sort=oldest_pending_age puts the most
// delayed first ("who is most behind right now").
func (s *Server) listEndpoints(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r)
	if err != nil {
		httpjson.Invalid(w, err)
		return
	}
	data := s.withHealth(r.Context(), allEndpointsJSON(s.endpoints.List(), lq.tenant))
	if lq.sort == "oldest_pending_age" {
		sortByOldestPending(data)
	}
	if lq.limit > 0 && len(data) > lq.limit {
		data = data[:lq.limit]
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"data": data})
}

// pathEndpoint is the endpoint the request's {id} names; when there is none
// it answers 404 and reports false.
func (s *Server) pathEndpoint(w http.ResponseWriter, r *http.Request) (endpoint.Endpoint, bool) {
	e, ok := s.endpoints.Get(r.PathValue("id"))
	if !ok {
		httpjson.Error(w, http.StatusNotFound, "endpoint not found")
	}
	return e, ok
}

// edit serves a change to the endpoint load finds for the request (load
// answers itself when there is none) under writeMu, so that this
// instance's read-modify-write cycles of endpoints do not interleave.
func (s *Server) edit(w http.ResponseWriter, r *http.Request, load func(http.ResponseWriter, *http.Request) (endpoint.Endpoint, bool), change func(e endpoint.Endpoint)) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if e, ok := load(w, r); ok {
		change(e)
	}
}

// readOptional decodes the request's body, when it has one, strictly into
// v, answering the request itself and reporting false when it cannot.
func readOptional(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body, ok := httpjson.ReadBody(w, r, limit)
	if !ok {
		return false
	}
	if len(body) > 0 { // the body is optional, however it is framed
		if err := httpjson.DecodeStrict(body, v); err != nil {
			httpjson.Invalid(w, err)
			return false
		}
	}
	return true
}

func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) {
	e, ok := s.pathEndpoint(w, r)
	if !ok {
		return
	}
	httpjson.Write(w, http.StatusOK, s.withHealth(r.Context(), []wire.Endpoint{toJSON(e)})[0])
}

// optional is a PATCH field. Set tells an absent field (leave unchanged)
// from a present one, and Null tells an explicit null from a value.
type optional[T any] struct {
	Set, Null bool
	Value     T
}

// UnmarshalJSON is called only for fields present in the body, including
// null ones, which is what makes Set meaningful.
func (o *optional[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.Value)
}

// patchRequest is the body of PATCH /v1/endpoints/{id}. Secrets are not
// changed here: an unknown field, so a 400.
type patchRequest struct {
	Tenant         optional[string]   `json:"tenant"`
	URL            optional[string]   `json:"url"`
	EventTypes     optional[[]string] `json:"event_types"`
	MaxConcurrency optional[int]      `json:"max_concurrency"`
	Payload        optional[string]   `json:"payload"`
	Status         optional[string]   `json:"status"`
	Mode           optional[string]   `json:"mode"`
	// Batch changes the given sizes of a batch endpoint; see parseBatch.
	Batch optional[json.RawMessage] `json:"batch"`
}

// apply changes e as the patch says. Null clears event_types (every type);
// for the other fields null has no meaning and is refused.
func (p *patchRequest) apply(e *endpoint.Endpoint) error {
	if p.Tenant.Set && (p.Tenant.Null || p.Tenant.Value != e.Tenant) {
		// Tenant scopes subscriptions and idempotency keys; moving an
		// endpoint between tenants would silently re-route their events.
		return &endpoint.ValidationError{Field: "tenant", Reason: "cannot be changed"}
	}
	if p.Mode.Set && (p.Mode.Null || !sameMode(p.Mode.Value, e.Mode)) {
		// A push endpoint's backlog and a feed's sequence cannot be
		// converted into each other: create a new endpoint instead.
		return &endpoint.ValidationError{Field: "mode", Reason: "is fixed when the endpoint is created"}
	}
	for _, f := range []struct {
		name string
		null bool
	}{{"url", p.URL.Null}, {"max_concurrency", p.MaxConcurrency.Null}, {"payload", p.Payload.Null}, {"status", p.Status.Null}, {"batch", p.Batch.Null}} {
		if f.null {
			return &endpoint.ValidationError{Field: f.name, Reason: "must not be null"}
		}
	}
	if p.URL.Set {
		e.URL = p.URL.Value
	}
	if p.EventTypes.Set {
		e.EventTypes = p.EventTypes.Value
	}
	if p.MaxConcurrency.Set {
		e.MaxConcurrency = p.MaxConcurrency.Value
	}
	if p.Payload.Set {
		e.Payload = p.Payload.Value
	}
	if p.Status.Set {
		e.Status = p.Status.Value
		if e.Status == endpoint.StatusActive {
			e.DisabledReason = "" // re-enabled: the old reason no longer holds
		}
	}
	if p.Batch.Set {
		if !e.Batched() {
			return &endpoint.ValidationError{Field: "batch", Reason: `is only for endpoints of mode "batch"`}
		}
		b, err := parseBatch(p.Batch.Value)
		if err != nil {
			return err
		}
		if e.Batch, err = b.apply(e.Batch); err != nil {
			return err
		}
	}
	return nil
}

// sameMode compares modes, "" reading as push.
func sameMode(a, b string) bool {
	norm := func(m string) string {
		if m == "" {
			return endpoint.ModePush
		}
		return m
	}
	return norm(a) == norm(b)
}

func (s *Server) patchEndpoint(w http.ResponseWriter, r *http.Request) {
	var p patchRequest
	if !httpjson.ReadStrict(w, r, s.maxBody, &p) {
		return
	}
	s.edit(w, r, s.pathEndpoint, func(e endpoint.Endpoint) {
		err := p.apply(&e)
		if err == nil {
			err = e.Validate()
		}
		if err != nil {
			httpjson.Invalid(w, err)
			return
		}
		e.UpdatedAt = s.now().UTC()
		if s.put(w, r, e) {
			httpjson.Write(w, http.StatusOK, toJSON(e))
		}
	})
}

// setPaused pauses or resumes an endpoint. The change is stored in the
// endpoint config, so every instance sees it; while paused, the endpoint's
// deliveries wait in the parked topic and none is lost.
func (s *Server) setPaused(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.edit(w, r, s.pathEndpoint, func(e endpoint.Endpoint) {
			if e.Paused != paused {
				e.Paused, e.UpdatedAt = paused, s.now().UTC()
				if !s.put(w, r, e) {
					return
				}
			}
			httpjson.Write(w, http.StatusOK, toJSON(e))
		})
	}
}

func (s *Server) deleteEndpoint(w http.ResponseWriter, r *http.Request) {
	s.edit(w, r, s.pathEndpoint, func(e endpoint.Endpoint) { s.delete(w, r, e) })
}

// delete removes e and, for a pull endpoint, its feed.
func (s *Server) delete(w http.ResponseWriter, r *http.Request, e endpoint.Endpoint) {
	id := e.ID
	if err := s.endpoints.Delete(r.Context(), id); err != nil {
		s.logger.ErrorContext(r.Context(), "api: deleting endpoint failed", "endpoint_id", id, "error", err)
		httpjson.Error(w, http.StatusServiceUnavailable, "could not delete the endpoint, retry: "+err.Error())
		return
	}
	if e.Pull() && s.feeds != nil {
		// A pull endpoint's feed holds what was delivered to it: it goes
		// with the endpoint. (A batch endpoint's holds what was not sent
		// yet: its runner turns that into dead letters, then deletes it.)
		// The endpoint is gone either way; a feed left behind only takes
		// space until its retention, and the log says which.
		if err := s.feeds.Delete(r.Context(), id); err != nil {
			s.logger.WarnContext(r.Context(), "api: deleting a pull endpoint's feed failed", "endpoint_id", id, "error", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
