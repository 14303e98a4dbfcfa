package client

// The types of endpoints, their health, feeds and secrets as the API shows them.

import (
	"time"

	"github.com/laneway/laneway/internal/admin/wire"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/ops/jobs/jobrecord"
)

// Values of the API's fields: endpoint modes (NewEndpoint.Mode,
// Endpoint.Mode) and redrive job states (RedriveJob.Status).
const (
	ModePush  = endpoint.ModePush
	ModePull  = endpoint.ModePull
	ModeBatch = endpoint.ModeBatch

	RedriveRunning = jobrecord.StatusRunning
	RedriveDone    = jobrecord.StatusDone
	RedriveFailed  = jobrecord.StatusFailed
)

// BatchConfig sizes a batch endpoint's batches: in an Endpoint, every
// size in effect; in NewEndpoint, zero sizes take the server's defaults;
// in EndpointUpdate, zero sizes are left unchanged.
type BatchConfig = wire.BatchConfig

// EndpointHealth is an endpoint's live delivery state.
type EndpointHealth = wire.EndpointHealth

// LaneState is an endpoint's lane as its owner reports it.
type LaneState = wire.LaneState

// Breaker is an endpoint's breaker state.
type Breaker = wire.Breaker

// PerMinute counts an endpoint's outcomes over the last 60 seconds.
type PerMinute = wire.PerMinute

// FeedPosition is where a pull endpoint's consumer stands in its feed.
type FeedPosition = wire.FeedPosition

// Endpoint is an endpoint as the API shows it (see wire.Endpoint): Secret
// is set only in the response to CreateEndpoint. Raw is the API's JSON
// for this endpoint (top-level responses only).
type Endpoint struct {
	wire.Endpoint
	rawJSON
}

// EndpointList is GET /v1/endpoints.
type EndpointList struct {
	Data []Endpoint `json:"data"`
	rawJSON
}

// FeedToken is a pull endpoint's consumer token (see wire.FeedToken);
// Token is set only in the answers to CreateFeedToken and RotateFeedToken.
type FeedToken struct {
	wire.FeedToken
	rawJSON
}

// FeedTokenList is GET /v1/endpoints/{id}/feed-tokens.
type FeedTokenList struct {
	Data []FeedToken `json:"data"`
	rawJSON
}

// Secret is one valid signing secret; ExpiresAt is nil for the current one.
type Secret = wire.Secret

// Secrets are an endpoint's valid secrets, newest first.
type Secrets struct {
	wire.SecretList
	rawJSON
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

// RotateOptions is the body of POST /v1/endpoints/{id}/secret/rotate.
type RotateOptions struct {
	// Secret is the new whsec_ secret; empty generates one.
	Secret string
	// Overlap is how long the current secrets stay valid; nil takes the
	// server's default (24 h), 0 retires them at once.
	Overlap *time.Duration
}
