package client

// The types of endpoints, their health, feeds and secrets as the API shows them.

import (
	"encoding/json"
	"time"
)

// Endpoint modes: a push endpoint is POSTed its deliveries, a pull
// endpoint's consumer reads them from its feed, and a batch endpoint is
// POSTed them in batches, in one order for the whole endpoint.
const (
	ModePush  = "push"
	ModePull  = "pull"
	ModeBatch = "batch"
)

// Endpoint is an endpoint as the API shows it. Secret is set only in the
// response to CreateEndpoint; Health in GET responses, and Feed in GET
// responses for a pull endpoint. Batch is set for a batch endpoint.
type Endpoint struct {
	ID             string          `json:"id"`
	Tenant         string          `json:"tenant"`
	URL            string          `json:"url"`
	EventTypes     []string        `json:"event_types"`
	MaxConcurrency int             `json:"max_concurrency"`
	Payload        string          `json:"payload"`
	Mode           string          `json:"mode"`
	Status         string          `json:"status"`
	Paused         bool            `json:"paused"`
	DisabledReason string          `json:"disabled_reason"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	Secret         string          `json:"secret,omitempty"`
	Batch          *BatchConfig    `json:"batch,omitempty"`
	Health         *EndpointHealth `json:"health,omitempty"`
	Feed           *FeedPosition   `json:"feed,omitempty"`

	// Raw is the API's JSON for this endpoint (top-level responses only).
	Raw json.RawMessage `json:"-"`
}

// BatchConfig sizes a batch endpoint's batches. An Endpoint shows every
// size in effect, the defaults filled in. In NewEndpoint a zero size takes
// the server's default (100 events, 1 MiB, 1000 ms); in EndpointUpdate it
// is left unchanged. MaxWaitMS 1 sends a batch without waiting for more.
type BatchConfig struct {
	MaxEvents int   `json:"max_events,omitempty"` // 1 to 1000
	MaxBytes  int   `json:"max_bytes,omitempty"`  // 1 KiB to 16 MiB
	MaxWaitMS int64 `json:"max_wait_ms,omitempty"`
}

// EndpointHealth is an endpoint's live delivery state.
type EndpointHealth struct {
	Pending                 int        `json:"pending"`
	InFlight                int        `json:"in_flight"`
	Parked                  int        `json:"parked"`
	OldestPendingAgeSeconds float64    `json:"oldest_pending_age_seconds"`
	ParkedReason            string     `json:"parked_reason"`
	Breaker                 Breaker    `json:"breaker"`
	LastError               string     `json:"last_error"`
	LastErrorAt             *time.Time `json:"last_error_at"`
	LastSuccessAt           *time.Time `json:"last_success_at"`
	PerMinute               PerMinute  `json:"per_minute"`
	Owner                   string     `json:"owner"`
	UpdatedAt               *time.Time `json:"updated_at"`
}

// Breaker is an endpoint's breaker state.
type Breaker struct {
	State               string     `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	PausedUntil         *time.Time `json:"paused_until"`
}

// PerMinute counts an endpoint's outcomes over the last 60 seconds.
type PerMinute struct {
	Delivered  int64 `json:"delivered"`
	Failed     int64 `json:"failed"`
	Dead       int64 `json:"dead"`
	Superseded int64 `json:"superseded"`
}

// FeedPosition is where a pull endpoint's consumer stands in its feed.
type FeedPosition struct {
	// AckedCursor is the acknowledged position; "" until the consumer
	// acknowledges one.
	AckedCursor string `json:"acked_cursor"`
	// StartCursor is the oldest retained event, EndCursor the next to come.
	StartCursor string `json:"start_cursor"`
	EndCursor   string `json:"end_cursor"`
	// Lag counts the events from the acknowledged position (or the start)
	// to the end.
	Lag                     int64   `json:"lag"`
	OldestUnackedAgeSeconds float64 `json:"oldest_unacked_age_seconds"`
}

// FeedToken is a pull endpoint's consumer token. Token, the secret itself,
// is set only in the answers to CreateFeedToken and RotateFeedToken;
// ExpiresAt only for a token rotated out with an overlap.
type FeedToken struct {
	ID        string          `json:"id"`
	Token     string          `json:"token,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt *time.Time      `json:"expires_at,omitempty"`
	Raw       json.RawMessage `json:"-"`
}

// FeedTokenList is GET /v1/endpoints/{id}/feed-tokens.
type FeedTokenList struct {
	Data []FeedToken     `json:"data"`
	Raw  json.RawMessage `json:"-"`
}

// EndpointList is GET /v1/endpoints.
type EndpointList struct {
	Data []Endpoint      `json:"data"`
	Raw  json.RawMessage `json:"-"`
}

// NewEndpoint is the body of POST /v1/endpoints. Zero MaxConcurrency and
// empty Secret take the server's defaults; empty EventTypes means every type.
// A pull endpoint (Mode ModePull) has no URL. Batch is for a batch endpoint
// (Mode ModeBatch) only; nil takes the default sizes.
type NewEndpoint struct {
	Tenant         string       `json:"tenant"`
	URL            string       `json:"url,omitempty"`
	Mode           string       `json:"mode,omitempty"` // ModePush (default), ModePull or ModeBatch
	EventTypes     []string     `json:"event_types,omitempty"`
	MaxConcurrency int          `json:"max_concurrency,omitempty"`
	Payload        string       `json:"payload,omitempty"` // "full" (default) or "thin"
	Secret         string       `json:"secret,omitempty"`
	Batch          *BatchConfig `json:"batch,omitempty"`
}

// EndpointUpdate is the body of PATCH /v1/endpoints/{id}: nil fields are left
// unchanged. A non-nil, empty EventTypes subscribes to every type. Batch
// changes a batch endpoint's non-zero sizes only.
type EndpointUpdate struct {
	URL            *string      `json:"url,omitempty"`
	EventTypes     *[]string    `json:"event_types,omitempty"`
	MaxConcurrency *int         `json:"max_concurrency,omitempty"`
	Payload        *string      `json:"payload,omitempty"`
	Status         *string      `json:"status,omitempty"`
	Batch          *BatchConfig `json:"batch,omitempty"`
}

// ListEndpointsOptions filters and orders GET /v1/endpoints.
type ListEndpointsOptions struct {
	Tenant string
	// Sort is "id" (default) or "oldest_pending_age" (most behind first).
	Sort  string
	Limit int
}

// Secret is one valid signing secret; ExpiresAt is nil for the current one.
type Secret struct {
	Secret    string     `json:"secret"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// Secrets are an endpoint's valid secrets, newest first.
type Secrets struct {
	EndpointID string          `json:"endpoint_id"`
	Secrets    []Secret        `json:"secrets"`
	Raw        json.RawMessage `json:"-"`
}

// RotateOptions is the body of POST /v1/endpoints/{id}/secret/rotate.
type RotateOptions struct {
	// Secret is the new whsec_ secret; empty generates one.
	Secret string
	// Overlap is how long the current secrets stay valid; nil takes the
	// server's default (24 h), 0 retires them at once.
	Overlap *time.Duration
}

func (e *Endpoint) keepRaw(raw json.RawMessage)      { e.Raw = raw }
func (l *EndpointList) keepRaw(raw json.RawMessage)  { l.Raw = raw }
func (t *FeedToken) keepRaw(raw json.RawMessage)     { t.Raw = raw }
func (l *FeedTokenList) keepRaw(raw json.RawMessage) { l.Raw = raw }
func (s *Secrets) keepRaw(raw json.RawMessage)       { s.Raw = raw }
