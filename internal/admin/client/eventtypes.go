package client

// The types of events, dead letters and redrives as the API shows them.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/laneway/laneway/internal/admin/wire"
	"github.com/laneway/laneway/internal/model/event"
)

// Published is the answer to PublishEvent.
type Published struct {
	ID        string `json:"id"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Duplicate is true when the API answered from an earlier request with
	// the same idempotency key (or event id): nothing new was published.
	Duplicate bool `json:"-"`
	rawJSON
}

// Event is an accepted event as GET /v1/events shows it: the envelope the
// producer sent and where Kafka stored it (as eventsearch.Event).
type Event struct {
	event.Envelope
	AcceptedAt time.Time `json:"accepted_at"`
	Partition  int32     `json:"partition"`
	Offset     int64     `json:"offset"`
}

// EventQuery selects events by the time Kafka accepted them. Since is
// required unless Cursor continues an earlier search.
type EventQuery struct {
	Tenant, Type, Entity string
	Since, Until         time.Time
	Cursor               string
	Limit                int
}

// Page is one page of a cursor listing (GET /v1/events, GET /v1/dead);
// NextCursor is "" on the last.
type Page[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor"`
	Scanned    int    `json:"scanned"`
	rawJSON
}

// EventPage is one page of GET /v1/events.
type EventPage = Page[Event]

// Delivery is the delivery a dead letter keeps for redrive, as the
// deliveries topic holds it.
type Delivery = event.Delivery

// DeadLetter is one record of the dead-letter topic and where it sits (as
// deadletter.Letter).
type DeadLetter struct {
	event.DeadLetter
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// DeadQuery selects dead letters; zero fields match everything.
type DeadQuery struct {
	EndpointID, Reason string
	Since, Until       time.Time
	Cursor             string
	Limit              int
}

// DeadPage is one page of GET /v1/dead.
type DeadPage = Page[DeadLetter]

// RedriveRequest selects dead letters to redrive: IDs, or every letter of
// EndpointID (optionally of one Reason) between Since and Until.
type RedriveRequest = wire.RedriveRequest

// RedriveJob is a redrive's progress (see wire.RedriveJob); Finished
// reports whether it is done or failed, Handled counts the matched letters
// it has dealt with.
type RedriveJob struct {
	wire.RedriveJob
	rawJSON
}

// PlatformHealth is GET /v1/health.
type PlatformHealth struct {
	wire.PlatformHealth
	rawJSON
}

// CreateEndpoint creates an endpoint; the answer carries its secret, which
// the API shows only here.
func (c *Client) CreateEndpoint(ctx context.Context, e NewEndpoint) (Endpoint, error) {
	return fetch[Endpoint](ctx, c, http.MethodPost, "/v1/endpoints", nil, e)
}

// ListEndpoints lists endpoints with their health.
func (c *Client) ListEndpoints(ctx context.Context, o ListEndpointsOptions) (EndpointList, error) {
	q := url.Values{}
	setString(q, "tenant", o.Tenant)
	setString(q, "sort", o.Sort)
	setInt(q, "limit", o.Limit)
	return fetch[EndpointList](ctx, c, http.MethodGet, "/v1/endpoints", q, nil)
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
	return fetch[Endpoint](ctx, c, method, path, nil, body)
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
	return fetch[Secrets](ctx, c, http.MethodPost, "/v1/endpoints/"+pathID(id)+"/secret/rotate", nil, body)
}

// RevealSecret reads an endpoint's valid secrets.
func (c *Client) RevealSecret(ctx context.Context, id string) (Secrets, error) {
	return fetch[Secrets](ctx, c, http.MethodGet, "/v1/endpoints/"+pathID(id)+"/secret", nil, nil)
}

// CreateFeedToken makes a consumer token for a pull endpoint; the answer
// carries the token, which the API shows only here.
func (c *Client) CreateFeedToken(ctx context.Context, id string) (FeedToken, error) {
	return c.feedTokenCall(ctx, "/v1/endpoints/"+pathID(id)+"/feed-tokens", nil)
}

// ListFeedTokens lists a pull endpoint's valid consumer tokens, without
// their values.
func (c *Client) ListFeedTokens(ctx context.Context, id string) (FeedTokenList, error) {
	return fetch[FeedTokenList](ctx, c, http.MethodGet, "/v1/endpoints/"+pathID(id)+"/feed-tokens", nil, nil)
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
	return fetch[FeedToken](ctx, c, http.MethodPost, path, nil, body)
}

// PublishEvent posts one event envelope (JSON) to /v1/events, with an
// Idempotency-Key header unless key is empty.
func (c *Client) PublishEvent(ctx context.Context, envelope json.RawMessage, key string) (Published, error) {
	var h http.Header
	if key = strings.TrimSpace(key); key != "" {
		h = http.Header{"Idempotency-Key": {key}}
	}
	out, resp, err := fetchResponse[Published](ctx, c, http.MethodPost, "/v1/events", nil, envelope, h)
	if err == nil {
		out.Duplicate = strings.EqualFold(resp.Header.Get("Idempotent-Replayed"), "true")
	}
	return out, err
}

// ListEvents reads one page of accepted events.
func (c *Client) ListEvents(ctx context.Context, qy EventQuery) (EventPage, error) {
	q := url.Values{}
	setString(q, "tenant", qy.Tenant)
	setString(q, "type", qy.Type)
	setString(q, "entity", qy.Entity)
	setSearch(q, qy.Since, qy.Until, qy.Cursor, qy.Limit)
	return fetch[EventPage](ctx, c, http.MethodGet, "/v1/events", q, nil)
}

// ListDead reads one page of dead letters.
func (c *Client) ListDead(ctx context.Context, qy DeadQuery) (DeadPage, error) {
	q := url.Values{}
	setString(q, "endpoint_id", qy.EndpointID)
	setString(q, "reason", qy.Reason)
	setSearch(q, qy.Since, qy.Until, qy.Cursor, qy.Limit)
	return fetch[DeadPage](ctx, c, http.MethodGet, "/v1/dead", q, nil)
}

// Redrive starts (or, for the same request or idempotency key, finds) a
// redrive job. created is false when the API answered with an existing job.
func (c *Client) Redrive(ctx context.Context, r RedriveRequest, idempotencyKey string) (job RedriveJob, created bool, err error) {
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	job, resp, err := fetchResponse[RedriveJob](ctx, c, http.MethodPost, "/v1/dead/redrive", nil, r, h)
	return job, err == nil && resp.StatusCode == http.StatusAccepted, err
}

// GetRedrive reads a redrive job's progress.
func (c *Client) GetRedrive(ctx context.Context, id string) (RedriveJob, error) {
	return fetch[RedriveJob](ctx, c, http.MethodGet, "/v1/redrives/"+pathID(id), nil, nil)
}

// Health reads the platform figures of GET /v1/health.
func (c *Client) Health(ctx context.Context) (PlatformHealth, error) {
	return fetch[PlatformHealth](ctx, c, http.MethodGet, "/v1/health", nil, nil)
}
