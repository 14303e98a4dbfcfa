package client

// The types of events, dead letters and redrives as the API shows them.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Published is the answer to PublishEvent.
type Published struct {
	ID        string `json:"id"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Duplicate is true when the API answered from an earlier request with
	// the same idempotency key (or event id): nothing new was published.
	Duplicate bool            `json:"-"`
	Raw       json.RawMessage `json:"-"`
}

// Event is an accepted event as GET /v1/events shows it.
type Event struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Tenant     string          `json:"tenant"`
	Entity     string          `json:"entity"`
	Revision   int64           `json:"revision"`
	Coalesce   bool            `json:"coalesce,omitempty"`
	OccurredAt time.Time       `json:"occurred_at"`
	Data       json.RawMessage `json:"data,omitempty"`
	AcceptedAt time.Time       `json:"accepted_at"`
	Partition  int32           `json:"partition"`
	Offset     int64           `json:"offset"`
}

// EventQuery selects events by the time Kafka accepted them. Since is
// required unless Cursor continues an earlier search.
type EventQuery struct {
	Tenant, Type, Entity string
	Since, Until         time.Time
	Cursor               string
	Limit                int
}

// EventPage is one page of GET /v1/events; NextCursor is "" on the last.
type EventPage struct {
	Data       []Event         `json:"data"`
	NextCursor string          `json:"next_cursor"`
	Scanned    int             `json:"scanned"`
	Raw        json.RawMessage `json:"-"`
}

// Delivery is the delivery a dead letter keeps for redrive.
type Delivery struct {
	EventID    string          `json:"event_id"`
	EndpointID string          `json:"endpoint_id"`
	Tenant     string          `json:"tenant"`
	Type       string          `json:"type"`
	Entity     string          `json:"entity"`
	Revision   int64           `json:"revision"`
	Coalesce   bool            `json:"coalesce,omitempty"`
	OccurredAt time.Time       `json:"occurred_at"`
	Data       json.RawMessage `json:"data,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	Attempts   int             `json:"attempts,omitempty"`
	LastError  string          `json:"last_error,omitempty"`
}

// DeadLetter is one record of the dead-letter topic.
type DeadLetter struct {
	ID         string    `json:"id"`
	Reason     string    `json:"reason"`
	Detail     string    `json:"detail,omitempty"`
	DeadAt     time.Time `json:"dead_at"`
	EndpointID string    `json:"endpoint_id,omitempty"`
	Delivery   *Delivery `json:"delivery,omitempty"`
	Raw        []byte    `json:"raw,omitempty"`
	Source     string    `json:"source,omitempty"`
	Partition  int32     `json:"partition"`
	Offset     int64     `json:"offset"`
}

// DeadQuery selects dead letters; zero fields match everything.
type DeadQuery struct {
	EndpointID, Reason string
	Since, Until       time.Time
	Cursor             string
	Limit              int
}

// DeadPage is one page of GET /v1/dead; NextCursor is "" on the last.
type DeadPage struct {
	Data       []DeadLetter    `json:"data"`
	NextCursor string          `json:"next_cursor"`
	Scanned    int             `json:"scanned"`
	Raw        json.RawMessage `json:"-"`
}

// RedriveRequest selects dead letters to redrive: IDs, or every letter of
// EndpointID (optionally of one Reason) between Since and Until.
type RedriveRequest struct {
	IDs        []string   `json:"ids,omitempty"`
	EndpointID string     `json:"endpoint_id,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	Since      *time.Time `json:"since,omitempty"`
	Until      *time.Time `json:"until,omitempty"`
}

// Redrive job states.
const (
	RedriveRunning = "running"
	RedriveDone    = "done"
	RedriveFailed  = "failed"
)

// RedriveJob is a redrive's progress.
type RedriveJob struct {
	ID              string          `json:"id"`
	Status          string          `json:"status"`
	Request         RedriveRequest  `json:"request"`
	Until           time.Time       `json:"until"`
	Scanned         int64           `json:"scanned"`
	Matched         int64           `json:"matched"`
	Redriven        int64           `json:"redriven"`
	Skipped         int64           `json:"skipped"`
	AlreadyRedriven int64           `json:"already_redriven"`
	Error           string          `json:"error,omitempty"`
	StartedAt       time.Time       `json:"started_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	FinishedAt      *time.Time      `json:"finished_at,omitempty"`
	Raw             json.RawMessage `json:"-"`
}

// Finished reports whether the job is done or failed.
func (j RedriveJob) Finished() bool { return j.Status == RedriveDone || j.Status == RedriveFailed }

// Handled counts the matched letters the job has dealt with.
func (j RedriveJob) Handled() int64 { return j.Redriven + j.Skipped + j.AlreadyRedriven }

// PlatformHealth is GET /v1/health.
type PlatformHealth struct {
	OldestPendingAgeSeconds        float64 `json:"oldest_pending_age_seconds"`
	HealthyOldestPendingAgeSeconds float64 `json:"healthy_oldest_pending_age_seconds"`
	MostBehindEndpointID           string  `json:"most_behind_endpoint_id"`
	Endpoints                      struct {
		Total       int `json:"total"`
		Disabled    int `json:"disabled"`
		Paused      int `json:"paused"`
		Parked      int `json:"parked"`
		BreakerOpen int `json:"breaker_open"`
	} `json:"endpoints"`
	Raw json.RawMessage `json:"-"`
}

// CreateEndpoint creates an endpoint; the answer carries its secret, which
// the API shows only here.
func (c *Client) CreateEndpoint(ctx context.Context, e NewEndpoint) (Endpoint, error) {
	var out Endpoint
	resp, err := c.call(ctx, http.MethodPost, "/v1/endpoints", nil, e, nil, &out)
	return withRaw(out, resp, err, func(v *Endpoint, raw json.RawMessage) { v.Raw = raw })
}

// ListEndpoints lists endpoints with their health.
func (c *Client) ListEndpoints(ctx context.Context, o ListEndpointsOptions) (EndpointList, error) {
	q := url.Values{}
	setString(q, "tenant", o.Tenant)
	setString(q, "sort", o.Sort)
	setInt(q, "limit", o.Limit)
	var out EndpointList
	resp, err := c.call(ctx, http.MethodGet, "/v1/endpoints", q, nil, nil, &out)
	return withRaw(out, resp, err, func(v *EndpointList, raw json.RawMessage) { v.Raw = raw })
}

// GetEndpoint returns one endpoint with its health.
func (c *Client) GetEndpoint(ctx context.Context, id string) (Endpoint, error) {
	return c.endpointCall(ctx, http.MethodGet, "/v1/endpoints/"+pathID(id), nil)
}

// UpdateEndpoint changes the fields u sets.
func (c *Client) UpdateEndpoint(ctx context.Context, id string, u EndpointUpdate) (Endpoint, error) {
	return c.endpointCall(ctx, http.MethodPatch, "/v1/endpoints/"+pathID(id), u)
}

// PauseEndpoint holds the endpoint's deliveries (they wait in Kafka).
func (c *Client) PauseEndpoint(ctx context.Context, id string) (Endpoint, error) {
	return c.endpointCall(ctx, http.MethodPost, "/v1/endpoints/"+pathID(id)+"/pause", nil)
}

// ResumeEndpoint lets a paused endpoint's deliveries flow again.
func (c *Client) ResumeEndpoint(ctx context.Context, id string) (Endpoint, error) {
	return c.endpointCall(ctx, http.MethodPost, "/v1/endpoints/"+pathID(id)+"/resume", nil)
}

// DeleteEndpoint removes an endpoint.
func (c *Client) DeleteEndpoint(ctx context.Context, id string) error {
	_, err := c.Do(ctx, http.MethodDelete, "/v1/endpoints/"+pathID(id), nil, nil, nil)
	return err
}

func (c *Client) endpointCall(ctx context.Context, method, path string, body any) (Endpoint, error) {
	var out Endpoint
	resp, err := c.call(ctx, method, path, nil, body, nil, &out)
	return withRaw(out, resp, err, func(v *Endpoint, raw json.RawMessage) { v.Raw = raw })
}

// RotateSecret puts a new secret first; the current ones stay valid for the
// overlap. It answers with every valid secret, newest first.
func (c *Client) RotateSecret(ctx context.Context, id string, o RotateOptions) (Secrets, error) {
	body := map[string]any{}
	if o.Secret != "" {
		body["secret"] = o.Secret
	}
	if o.Overlap != nil {
		body["overlap_seconds"] = int64(o.Overlap.Seconds())
	}
	var out Secrets
	resp, err := c.call(ctx, http.MethodPost, "/v1/endpoints/"+pathID(id)+"/secret/rotate", nil, body, nil, &out)
	return withRaw(out, resp, err, func(v *Secrets, raw json.RawMessage) { v.Raw = raw })
}

// RevealSecret reads an endpoint's valid secrets.
func (c *Client) RevealSecret(ctx context.Context, id string) (Secrets, error) {
	var out Secrets
	resp, err := c.call(ctx, http.MethodGet, "/v1/endpoints/"+pathID(id)+"/secret", nil, nil, nil, &out)
	return withRaw(out, resp, err, func(v *Secrets, raw json.RawMessage) { v.Raw = raw })
}

// CreateFeedToken makes a consumer token for a pull endpoint; the answer
// carries the token, which the API shows only here.
func (c *Client) CreateFeedToken(ctx context.Context, id string) (FeedToken, error) {
	return c.feedTokenCall(ctx, "/v1/endpoints/"+pathID(id)+"/feed-tokens", nil)
}

// ListFeedTokens lists a pull endpoint's valid consumer tokens, without
// their values.
func (c *Client) ListFeedTokens(ctx context.Context, id string) (FeedTokenList, error) {
	var out FeedTokenList
	resp, err := c.call(ctx, http.MethodGet, "/v1/endpoints/"+pathID(id)+"/feed-tokens", nil, nil, nil, &out)
	return withRaw(out, resp, err, func(v *FeedTokenList, raw json.RawMessage) { v.Raw = raw })
}

// RotateFeedToken replaces the consumer token tokenID with a new one, which
// the answer carries; the old one stays valid for overlap (0: revoked at
// once), so that consumers can switch without a gap.
func (c *Client) RotateFeedToken(ctx context.Context, id, tokenID string, overlap time.Duration) (FeedToken, error) {
	var body any
	if overlap > 0 {
		// Whole seconds, rounded up: a short overlap must not become none.
		body = map[string]int64{"overlap_seconds": int64((overlap + time.Second - 1) / time.Second)}
	}
	return c.feedTokenCall(ctx, "/v1/endpoints/"+pathID(id)+"/feed-tokens/"+pathID(tokenID)+"/rotate", body)
}

// RevokeFeedToken ends a consumer token's validity at once.
func (c *Client) RevokeFeedToken(ctx context.Context, id, tokenID string) error {
	_, err := c.Do(ctx, http.MethodDelete, "/v1/endpoints/"+pathID(id)+"/feed-tokens/"+pathID(tokenID), nil, nil, nil)
	return err
}

func (c *Client) feedTokenCall(ctx context.Context, path string, body any) (FeedToken, error) {
	var out FeedToken
	resp, err := c.call(ctx, http.MethodPost, path, nil, body, nil, &out)
	return withRaw(out, resp, err, func(v *FeedToken, raw json.RawMessage) { v.Raw = raw })
}

// PublishEvent posts one event envelope (JSON) to /v1/events, with an
// Idempotency-Key header unless key is empty.
func (c *Client) PublishEvent(ctx context.Context, envelope json.RawMessage, key string) (Published, error) {
	var h http.Header
	if key = strings.TrimSpace(key); key != "" {
		h = http.Header{"Idempotency-Key": {key}}
	}
	var out Published
	resp, err := c.call(ctx, http.MethodPost, "/v1/events", nil, envelope, h, &out)
	if err == nil {
		out.Duplicate = strings.EqualFold(resp.Header.Get("Idempotent-Replayed"), "true")
	}
	return withRaw(out, resp, err, func(v *Published, raw json.RawMessage) { v.Raw = raw })
}

// ListEvents reads one page of accepted events.
func (c *Client) ListEvents(ctx context.Context, qy EventQuery) (EventPage, error) {
	q := url.Values{}
	setString(q, "tenant", qy.Tenant)
	setString(q, "type", qy.Type)
	setString(q, "entity", qy.Entity)
	setTime(q, "since", qy.Since)
	setTime(q, "until", qy.Until)
	setString(q, "cursor", qy.Cursor)
	setInt(q, "limit", qy.Limit)
	var out EventPage
	resp, err := c.call(ctx, http.MethodGet, "/v1/events", q, nil, nil, &out)
	return withRaw(out, resp, err, func(v *EventPage, raw json.RawMessage) { v.Raw = raw })
}

// ListDead reads one page of dead letters.
func (c *Client) ListDead(ctx context.Context, qy DeadQuery) (DeadPage, error) {
	q := url.Values{}
	setString(q, "endpoint_id", qy.EndpointID)
	setString(q, "reason", qy.Reason)
	setTime(q, "since", qy.Since)
	setTime(q, "until", qy.Until)
	setString(q, "cursor", qy.Cursor)
	setInt(q, "limit", qy.Limit)
	var out DeadPage
	resp, err := c.call(ctx, http.MethodGet, "/v1/dead", q, nil, nil, &out)
	return withRaw(out, resp, err, func(v *DeadPage, raw json.RawMessage) { v.Raw = raw })
}

// Redrive starts (or, for the same request or idempotency key, finds) a
// redrive job. created is false when the API answered with an existing job.
func (c *Client) Redrive(ctx context.Context, r RedriveRequest, idempotencyKey string) (job RedriveJob, created bool, err error) {
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	resp, err := c.call(ctx, http.MethodPost, "/v1/dead/redrive", nil, r, h, &job)
	job, err = withRaw(job, resp, err, func(v *RedriveJob, raw json.RawMessage) { v.Raw = raw })
	return job, err == nil && resp.StatusCode == http.StatusAccepted, err
}

// GetRedrive reads a redrive job's progress.
func (c *Client) GetRedrive(ctx context.Context, id string) (RedriveJob, error) {
	var out RedriveJob
	resp, err := c.call(ctx, http.MethodGet, "/v1/redrives/"+pathID(id), nil, nil, nil, &out)
	return withRaw(out, resp, err, func(v *RedriveJob, raw json.RawMessage) { v.Raw = raw })
}

// Health reads the platform figures of GET /v1/health.
func (c *Client) Health(ctx context.Context) (PlatformHealth, error) {
	var out PlatformHealth
	resp, err := c.call(ctx, http.MethodGet, "/v1/health", nil, nil, nil, &out)
	return withRaw(out, resp, err, func(v *PlatformHealth, raw json.RawMessage) { v.Raw = raw })
}

func withRaw[T any](v T, resp *Response, err error, set func(*T, json.RawMessage)) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	set(&v, json.RawMessage(resp.Body))
	return v, nil
}
