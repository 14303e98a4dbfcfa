// Package endpoint defines a customer endpoint (its URL, subscriptions,
// concurrency limit and secrets) and validates changes to it. The config
// itself lives on the compacted topic laneway.endpoints; see Store.
package endpoint

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/laneway/laneway/internal/plumbing/reqtarget"
)

// Status values.
const (
	StatusActive   = "active"
	StatusDisabled = "disabled"
)

// Payload values: what a delivery's body carries.
const (
	// PayloadFull sends the event's data (the default, also for "").
	PayloadFull = "full"
	// PayloadThin sends only id, type, timestamp and entity {id,
	// revision}, never data: the receiver fetches the current state
	// itself, and a thin event can never carry a stale state.
	PayloadThin = "thin"
)

// Mode values: how the endpoint receives its deliveries. The mode is fixed
// when the endpoint is created.
const (
	// ModePush POSTs each delivery to URL (the default, also for "").
	ModePush = "push"
	// ModePull appends each delivery, in order, to the endpoint's feed,
	// which its consumer reads with GET /v1/feed/{id}. It has no URL.
	ModePull = "pull"
	// ModeBatch POSTs the endpoint's deliveries to URL in signed batches,
	// one batch at a time, in one order for the whole endpoint.
	ModeBatch = "batch"
)

// Limits on endpoint settings.
const (
	DefaultMaxConcurrency = 4
	MinConcurrency        = 1
	MaxConcurrency        = 1000
	SecretPrefix          = "whsec_"
	maxURLLen             = 2048
)

// Endpoint is one customer endpoint. It is the value of a record on
// laneway.endpoints, keyed by ID.
type Endpoint struct {
	ID             string   `json:"id"`
	Tenant         string   `json:"tenant"`
	URL            string   `json:"url"`
	EventTypes     []string `json:"event_types"`
	MaxConcurrency int      `json:"max_concurrency"`
	Secrets        []Secret `json:"secrets"`
	Status         string   `json:"status"`
	DisabledReason string   `json:"disabled_reason,omitempty"`
	Paused         bool     `json:"paused,omitempty"`
	// Payload is PayloadFull ("" reads as full) or PayloadThin.
	Payload string `json:"payload,omitempty"`
	// Mode is ModePush ("" reads as push) or ModePull.
	Mode string `json:"mode,omitempty"`
	// Batch sizes a batch endpoint's batches; nil takes the defaults.
	Batch *BatchConfig `json:"batch,omitempty"`
	// FeedTokens are the consumer tokens that may read a pull endpoint's
	// feed, stored as hashes only.
	FeedTokens []FeedToken `json:"feed_tokens,omitempty"`
	CreatedAt  time.Time   `json:"created_at"`
	UpdatedAt  time.Time   `json:"updated_at"`
}

// Secret is a signing secret. Several are valid during a rotation; the ones
// whose ExpiresAt has passed are no longer used to sign.
type Secret struct {
	Value     string    `json:"value"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// ValidationError says which input was refused and why.
type ValidationError struct{ Field, Reason string }

func (e *ValidationError) Error() string { return e.Field + ": " + e.Reason }

// InputField names the field at fault (for the API's error answers).
func (e *ValidationError) InputField() string { return e.Field }

// Subscribes reports whether the endpoint wants events of this type from
// this tenant. An empty EventTypes means every type.
func (e *Endpoint) Subscribes(tenant, eventType string) bool {
	if e.Tenant != tenant || e.Status != StatusActive {
		return false
	}
	return len(e.EventTypes) == 0 || slices.Contains(e.EventTypes, eventType)
}

// Pull reports whether the endpoint's deliveries go to its feed rather
// than to a URL.
func (e *Endpoint) Pull() bool { return e.Mode == ModePull }

// Batched reports whether the endpoint gets its deliveries in batches.
func (e *Endpoint) Batched() bool { return e.Mode == ModeBatch }

// Ordered reports whether the endpoint's deliveries pass through its
// feed topic (pull and batch endpoints) rather than straight to a POST.
func (e *Endpoint) Ordered() bool { return e.Pull() || e.Batched() }

// Thin reports whether deliveries to the endpoint leave the data out.
func (e *Endpoint) Thin() bool { return e.Payload == PayloadThin }

// SigningSecrets returns the secrets valid at now, newest first.
func (e *Endpoint) SigningSecrets(now time.Time) []string {
	out := make([]string, 0, len(e.Secrets))
	for _, s := range e.Secrets {
		if s.ExpiresAt.IsZero() || now.Before(s.ExpiresAt) {
			out = append(out, s.Value)
		}
	}
	return out
}

// Validate checks every field a client can set.
func (e *Endpoint) Validate() error {
	if strings.TrimSpace(e.Tenant) == "" {
		return &ValidationError{"tenant", "is required"}
	}
	if len(e.Tenant) > 256 {
		return &ValidationError{"tenant", "is longer than 256 bytes"}
	}
	if err := e.validateTarget(); err != nil {
		return err
	}
	if e.Batch != nil && !e.Batched() {
		return &ValidationError{"batch", `is only for endpoints of mode "batch"`}
	}
	if e.Payload != "" && e.Payload != PayloadFull && e.Payload != PayloadThin {
		return &ValidationError{"payload", `must be "full" or "thin"`}
	}
	if e.MaxConcurrency < MinConcurrency || e.MaxConcurrency > MaxConcurrency {
		return &ValidationError{"max_concurrency", fmt.Sprintf("must be between %d and %d", MinConcurrency, MaxConcurrency)}
	}
	for _, t := range e.EventTypes {
		if strings.TrimSpace(t) == "" || len(t) > 256 {
			return &ValidationError{"event_types", "entries must be non-empty and at most 256 bytes"}
		}
	}
	for _, s := range e.Secrets {
		if err := ValidateSecret(s.Value); err != nil {
			return err
		}
	}
	if e.Status != StatusActive && e.Status != StatusDisabled {
		return &ValidationError{"status", "must be active or disabled"}
	}
	return nil
}

// validateTarget checks the mode and that a push endpoint has a URL and a
// pull endpoint none.
func (e *Endpoint) validateTarget() error {
	switch e.Mode {
	case "", ModePush:
		return ValidateURL(e.URL)
	case ModePull:
		if e.URL != "" {
			return &ValidationError{"url", "must be empty for a pull endpoint: its consumer reads GET /v1/feed/{id}"}
		}
		return validateFeedTokens(e.FeedTokens)
	case ModeBatch:
		if err := ValidateURL(e.URL); err != nil {
			return err
		}
		return e.Batch.validate()
	default:
		return &ValidationError{"mode", `must be "push", "pull" or "batch"`}
	}
}

// ValidateURL accepts absolute http(s) URLs with a host and no credentials,
// whose path and query a request line can carry as written.
// Whether the host may be reached is decided at delivery time (SSRF guard).
func ValidateURL(raw string) error {
	if raw == "" {
		return &ValidationError{"url", "is required"}
	}
	if len(raw) > maxURLLen {
		return &ValidationError{"url", "is too long"}
	}
	if !printableASCII(raw) {
		return &ValidationError{"url", "must not contain spaces, control or non-ASCII characters: " +
			"percent-encode them in the path and query, and give an international host name in its punycode (xn--) form"}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return &ValidationError{"url", "is not a valid URL"}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return &ValidationError{"url", "scheme must be http or https"}
	}
	if u.Hostname() == "" {
		return &ValidationError{"url", "must have a host"}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return &ValidationError{"url", "port must be between 1 and 65535"}
		}
	}
	if u.User != nil {
		return &ValidationError{"url", "must not carry credentials"}
	}
	if !reqtarget.Valid(writtenTarget(raw)) {
		return &ValidationError{"url", `must percent-encode any of "<>[\]^` + "`" + `{|} in its path and query, and a % that starts no escape (as %25)`}
	}
	return nil
}

// printableASCII reports whether s holds only visible ASCII characters.
func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// writtenTarget is the path and query of a parsed absolute URL as written:
// what follows the host, up to a fragment.
func writtenTarget(raw string) string {
	_, rest, _ := strings.Cut(raw, "//")
	i := strings.IndexAny(rest, "/?#")
	if i < 0 {
		return ""
	}
	target, _, _ := strings.Cut(rest[i:], "#")
	return target
}

// ValidateSecret accepts whsec_ followed by base64 of 24 to 64 bytes.
func ValidateSecret(s string) error {
	raw, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return &ValidationError{"secret", "must start with " + SecretPrefix}
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return &ValidationError{"secret", "must be base64 after " + SecretPrefix}
	}
	if len(key) < 24 || len(key) > 64 {
		return &ValidationError{"secret", "key must be 24 to 64 bytes"}
	}
	return nil
}

// NewSecret generates a random whsec_ secret of 32 bytes.
func NewSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails on supported platforms
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}
