package inbound

import (
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/laneway/laneway/signing"
)

// Source kinds: the signature scheme a source's requests are verified with.
const (
	KindStripe   = "stripe"   // Stripe-Signature: t=…,v1=hex HMAC-SHA256 of "t.body"
	KindGitHub   = "github"   // X-Hub-Signature-256: sha256=hex HMAC-SHA256 of body
	KindSlack    = "slack"    // X-Slack-Signature: v0=hex HMAC-SHA256 of "v0:ts:body"
	KindStandard = "standard" // Standard Webhooks: webhook-id/-timestamp/-signature
)

// Limits and defaults of source settings.
const (
	// DefaultMaxBodyBytes is a source's body limit unless it sets one.
	DefaultMaxBodyBytes = 1 << 20
	// MaxBodyLimit bounds a source's max_body_bytes. Bodies near it also
	// need the inbound topic's max.message.bytes raised (see docs/inbound.md).
	MaxBodyLimit = 16 << 20
	// DefaultTolerance is how far a signed timestamp may be from the time
	// the request was received.
	DefaultTolerance = 5 * time.Minute
	// MaxTolerance bounds a source's tolerance.
	MaxTolerance = 24 * time.Hour
	maxFieldLen  = 256
	maxSecretLen = 1024
)

// Source is one configured sender: the value of a record on the compacted
// sources topic, keyed by ID. Its requests arrive at POST /in/{ID}.
type Source struct {
	// ID names the source in the capture URL and is the Kafka key of its
	// captured requests: lowercase letters, digits, '-' and '_', at most 64.
	ID string `json:"id"`
	// Kind is the signature scheme: stripe, github, slack or standard.
	Kind string `json:"kind"`
	// Tenant receives the source's events.
	Tenant string `json:"tenant"`
	// Secret is the current signing secret; PreviousSecret, when set, is
	// still accepted, so that a rotation at the provider loses nothing.
	Secret         string `json:"secret"`
	PreviousSecret string `json:"previous_secret,omitempty"`
	// CaptureToken, when set, makes the capture URL /in/{ID}/{CaptureToken}
	// and the bare /in/{ID} unknown (see capturetoken.go);
	// PreviousCaptureToken is still accepted while the provider switches.
	// Both are secrets, sealed with the signing secrets.
	CaptureToken         string `json:"capture_token,omitempty"`
	PreviousCaptureToken string `json:"previous_capture_token,omitempty"`
	// ToleranceSeconds bounds the distance between a signed timestamp and
	// the time the request was received (stripe, slack, standard).
	ToleranceSeconds int64 `json:"tolerance_seconds"`
	// MaxBodyBytes is the body limit; larger requests get 413.
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// TypeField says where the provider's event type is: a dotted path
	// ("event.type"), a JSON pointer ("/event/type") or "header:Name".
	TypeField string `json:"type_field"`
	// TypePrefix is put before the provider's type ("stripe." makes
	// "invoice.paid" into "stripe.invoice.paid").
	TypePrefix string `json:"type_prefix"`
	// TypeMap renames provider types; a mapped type is used as is,
	// without the prefix.
	TypeMap map[string]string `json:"type_map,omitempty"`
	// EntityField says where the entity id is (same syntax as TypeField).
	// An event without it gets its own event id as entity (no ordering).
	EntityField string `json:"entity_field"`
	// RevisionField optionally says where a non-negative integer revision
	// is; without it (or when absent) the revision is 0.
	RevisionField string `json:"revision_field,omitempty"`
	// Coalesce marks the source's events as state updates that a newer
	// revision may replace (see the coalesce package).
	Coalesce  bool      `json:"coalesce,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	// heldErr, set by the store, says why the stored secrets do not open
	// here: the source then has none and Verify rejects its requests.
	heldErr error
	// heldToken says that a held source has a capture token (which did
	// not open either): its bare path stays unknown.
	heldToken bool
}

// Tolerance is the source's timestamp tolerance as a duration.
func (s *Source) Tolerance() time.Duration {
	if s.ToleranceSeconds <= 0 {
		return DefaultTolerance
	}
	return time.Duration(s.ToleranceSeconds) * time.Second
}

// Secrets returns the secrets a signature may be made with, current first.
func (s *Source) Secrets() []string {
	if s.PreviousSecret == "" {
		return []string{s.Secret}
	}
	return []string{s.Secret, s.PreviousSecret}
}

// kindDefaults are the mapping defaults of each kind.
var kindDefaults = map[string]struct{ typeField, typePrefix, entityField string }{
	KindStripe:   {"type", "stripe.", "data.object.id"},
	KindGitHub:   {"header:X-GitHub-Event", "github.", "repository.full_name"},
	KindSlack:    {"event.type", "slack.", "event.channel"},
	KindStandard: {"type", "", "data.id"},
}

// SetDefaults fills the zero fields that have a default. TypePrefix is
// left alone: an empty prefix is a valid choice (the API applies the kind's
// prefix when the field is absent from the create request).
func (s *Source) SetDefaults() {
	d := kindDefaults[s.Kind]
	s.ToleranceSeconds = cmp.Or(s.ToleranceSeconds, int64(DefaultTolerance/time.Second))
	s.MaxBodyBytes = cmp.Or(s.MaxBodyBytes, DefaultMaxBodyBytes)
	s.TypeField = cmp.Or(s.TypeField, d.typeField)
	s.EntityField = cmp.Or(s.EntityField, d.entityField)
}

// DefaultTypePrefix is the prefix a new source of kind gets ("stripe.").
func DefaultTypePrefix(kind string) string { return kindDefaults[kind].typePrefix }

// ValidationError says which source setting was refused and why.
type ValidationError struct{ Field, Reason string }

func (e *ValidationError) Error() string { return e.Field + ": " + e.Reason }

// InputField names the field at fault (for the API's error answers).
func (e *ValidationError) InputField() string { return e.Field }

var sourceIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Validate checks every setting.
func (s *Source) Validate() error {
	if !sourceIDPattern.MatchString(s.ID) {
		return &ValidationError{"id", "must be 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter or digit"}
	}
	if _, ok := kindDefaults[s.Kind]; !ok {
		return &ValidationError{"kind", "must be stripe, github, slack or standard"}
	}
	if strings.TrimSpace(s.Tenant) == "" || len(s.Tenant) > maxFieldLen {
		return &ValidationError{"tenant", "is required and at most 256 bytes"}
	}
	if err := validateSecret(s.Kind, "secret", s.Secret, true); err != nil {
		return err
	}
	if err := validateSecret(s.Kind, "previous_secret", s.PreviousSecret, false); err != nil {
		return err
	}
	if err := validateCaptureTokens(s.CaptureToken, s.PreviousCaptureToken); err != nil {
		return err
	}
	if s.ToleranceSeconds < 1 || time.Duration(s.ToleranceSeconds)*time.Second > MaxTolerance {
		return &ValidationError{"tolerance_seconds", "must be between 1 and 86400"}
	}
	if s.MaxBodyBytes < 1 || s.MaxBodyBytes > MaxBodyLimit {
		return &ValidationError{"max_body_bytes", fmt.Sprintf("must be between 1 and %d", MaxBodyLimit)}
	}
	for _, f := range []struct {
		name, value string
		required    bool
	}{{"type_field", s.TypeField, true}, {"entity_field", s.EntityField, true}, {"revision_field", s.RevisionField, false}} {
		if f.value == "" && !f.required {
			continue
		}
		if _, err := parseFieldPath(f.value); err != nil {
			return &ValidationError{f.name, err.Error()}
		}
	}
	if len(s.TypePrefix) > 64 {
		return &ValidationError{"type_prefix", "is longer than 64 bytes"}
	}
	for from, to := range s.TypeMap {
		if from == "" || to == "" || len(from) > maxFieldLen || len(to) > maxFieldLen {
			return &ValidationError{"type_map", "entries must be non-empty and at most 256 bytes"}
		}
	}
	return nil
}

func validateSecret(kind, field, secret string, required bool) error {
	if secret == "" {
		if required {
			return &ValidationError{field, "is required"}
		}
		return nil
	}
	if len(secret) > maxSecretLen {
		return &ValidationError{field, "is longer than 1024 bytes"}
	}
	if kind == KindStandard {
		if _, err := signing.NewSigner([]string{secret}); err != nil {
			return &ValidationError{field, "must be whsec_ followed by base64"}
		}
	}
	return nil
}

// NewSecret generates a secret for kinds where we may choose it (github:
// 32 random bytes in hex; standard: whsec_ + base64 of 32 random bytes).
// Stripe and Slack generate their secrets themselves: ok is false.
func NewSecret(kind string) (secret string, ok bool) {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails on supported platforms
	switch kind {
	case KindGitHub:
		return hex.EncodeToString(key), true
	case KindStandard:
		return signing.SecretPrefix + base64.StdEncoding.EncodeToString(key), true
	}
	return "", false
}

// signatureHeaders are the headers a request of each kind must carry; one
// missing is refused at the door with 400.
var signatureHeaders = map[string][]string{
	KindStripe:   {"Stripe-Signature"},
	KindGitHub:   {"X-Hub-Signature-256"},
	KindSlack:    {"X-Slack-Signature", "X-Slack-Request-Timestamp"},
	KindStandard: {signing.HeaderID, signing.HeaderTimestamp, signing.HeaderSignature},
}

// missingSignatureHeader returns the first signature header of kind that h
// lacks, or "".
func missingSignatureHeader(kind string, h http.Header) string {
	for _, name := range signatureHeaders[kind] {
		if h.Get(name) == "" {
			return name
		}
	}
	return ""
}
