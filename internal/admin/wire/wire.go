// Package wire holds the admin API's JSON types: what its handlers answer
// and what its client (internal/admin/client, the laneway command) decodes and
// sends, written once so that the two cannot drift apart. It is plain
// data, without the server's Kafka or Redis code; openapi.json documents
// the same shapes, and the API's contract tests check them against it.
package wire

import (
	"time"

	"github.com/laneway/laneway/internal/ops/jobs/jobrecord"
)

// Endpoint is an endpoint as the API shows it: every field is always
// present, the defaults filled in. Secret is set only in the answer that
// creates it; Health in GET answers, and Feed in GET answers for a pull or
// batch endpoint. Batch is set for a batch endpoint.
type Endpoint struct {
	ID             string   `json:"id"`
	Tenant         string   `json:"tenant"`
	URL            string   `json:"url"`
	EventTypes     []string `json:"event_types"`
	MaxConcurrency int      `json:"max_concurrency"`
	Payload        string   `json:"payload"`
	// Mode is push, pull or batch (endpoint.ModePush, ModePull, ModeBatch).
	Mode           string    `json:"mode"`
	Status         string    `json:"status"`
	Paused         bool      `json:"paused"`
	DisabledReason string    `json:"disabled_reason"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	Secret         string    `json:"secret,omitempty"`
	// Batch is a batch endpoint's batch sizes in effect, defaults applied.
	Batch *BatchConfig `json:"batch,omitempty"`
	// Health is the endpoint's live state, in GET answers.
	Health *EndpointHealth `json:"health,omitempty"`
	// Feed is a pull or batch endpoint's feed position, in GET answers.
	Feed *FeedPosition `json:"feed,omitempty"`
}

// BatchConfig sizes a batch endpoint's batches. An Endpoint shows every
// size in effect, the defaults filled in (so none is ever zero there). In
// a create request a zero size takes the server's default (100 events,
// 1 MiB, 1000 ms); in an update it is left unchanged. MaxWaitMS 1 sends a
// batch without waiting for more.
type BatchConfig struct {
	MaxEvents int   `json:"max_events,omitempty"` // 1 to 1000
	MaxBytes  int   `json:"max_bytes,omitempty"`  // 1 KiB to 16 MiB
	MaxWaitMS int64 `json:"max_wait_ms,omitempty"`
}

// EndpointHealth is an endpoint's live delivery state. Ages are computed
// at read time from its owner's snapshot.
type EndpointHealth struct {
	LaneState
	OldestPendingAgeSeconds float64    `json:"oldest_pending_age_seconds"`
	UpdatedAt               *time.Time `json:"updated_at"`
}

// LaneState is an endpoint's lane as its owner reports it: the owner
// publishes it (health.Snapshot) and the API shows it as published.
type LaneState struct {
	Pending  int `json:"pending"`
	InFlight int `json:"in_flight"`
	Parked   int `json:"parked"`
	// ParkedReason says why the lane is parked ("" when it is not).
	ParkedReason  string     `json:"parked_reason"`
	Breaker       Breaker    `json:"breaker"`
	LastError     string     `json:"last_error"`
	LastErrorAt   *time.Time `json:"last_error_at"`
	LastSuccessAt *time.Time `json:"last_success_at"`
	PerMinute     PerMinute  `json:"per_minute"`
	Owner         string     `json:"owner"`
}

// Breaker is an endpoint's breaker state; its owner publishes the same
// (health.Breaker).
type Breaker struct {
	State               string     `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	PausedUntil         *time.Time `json:"paused_until"`
}

// PerMinute counts an endpoint's outcomes over the last 60 seconds; its
// owner publishes the same (health.PerMinute).
type PerMinute struct {
	Delivered  int64 `json:"delivered"`
	Failed     int64 `json:"failed"` // attempts that will be retried
	Dead       int64 `json:"dead"`
	Superseded int64 `json:"superseded"`
}

// FeedPosition is where a pull endpoint's consumer stands in its feed, or
// how far a batch endpoint's feed was sent.
type FeedPosition struct {
	// AckedCursor is the acknowledged position (for a batch endpoint: its
	// receiver's 2xx and dead letters so far); "" until a pull consumer
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

// PlatformHealth is GET /v1/health: the capacity figures, which tell one
// slow customer from a platform short of capacity.
type PlatformHealth struct {
	// OldestPendingAgeSeconds is over every endpoint.
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	// HealthyOldestPendingAgeSeconds is over the endpoints keeping up
	// (active, not paused, not parked, breaker closed): it grows only when
	// the platform itself lacks capacity.
	HealthyOldestPendingAgeSeconds float64 `json:"healthy_oldest_pending_age_seconds"`
	MostBehindEndpointID           string  `json:"most_behind_endpoint_id"`
	Endpoints                      struct {
		Total       int `json:"total"`
		Disabled    int `json:"disabled"`
		Paused      int `json:"paused"`
		Parked      int `json:"parked"`
		BreakerOpen int `json:"breaker_open"`
	} `json:"endpoints"`
}

// Secret is one valid signing secret; ExpiresAt is nil for the current one.
type Secret struct {
	Secret    string     `json:"secret"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// SecretList is an endpoint's valid secrets, newest first.
type SecretList struct {
	EndpointID string   `json:"endpoint_id"`
	Secrets    []Secret `json:"secrets"`
}

// FeedToken is a pull endpoint's consumer token as the API shows it.
// Token, the secret itself, is set only in the answers that create one;
// ExpiresAt only for a token rotated out with an overlap.
type FeedToken struct {
	ID        string     `json:"id"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Token     string     `json:"token,omitempty"`
}

// RedriveRequest is the body of POST /v1/dead/redrive: the dead letters
// IDs names, or every letter of EndpointID (optionally of one Reason)
// between Since and Until. Its JSON is hashed into the job id: its fields
// and their order are fixed.
type RedriveRequest struct {
	IDs        []string   `json:"ids,omitempty"`
	EndpointID string     `json:"endpoint_id,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	Since      *time.Time `json:"since,omitempty"`
	Until      *time.Time `json:"until,omitempty"`
}

// RedriveJob is a redrive's progress, as the API shows it and Redis
// stores it. Redriven counts the letters written back to the deliveries
// topic; Skipped those that cannot be redriven (no delivery, endpoint
// deleted or disabled); AlreadyRedriven those an earlier redrive sent.
type RedriveJob struct {
	jobrecord.Head[RedriveRequest]
	Redriven        int64 `json:"redriven"`
	Skipped         int64 `json:"skipped"`
	AlreadyRedriven int64 `json:"already_redriven"`
	jobrecord.Tail
}

// Handled counts the matched letters the job has dealt with.
func (j RedriveJob) Handled() int64 { return j.Redriven + j.Skipped + j.AlreadyRedriven }
