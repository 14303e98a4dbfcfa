package inbound

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/laneway/laneway/signing"
)

// Reasons a request is rejected. Classify maps every failure to one.
const (
	ReasonBadSignature     = "bad_signature"     // no signature matches a secret, or it is malformed
	ReasonStaleTimestamp   = "stale_timestamp"   // signed timestamp outside the tolerance of receipt
	ReasonTooLarge         = "too_large"         // body over the source's limit or the event limit
	ReasonMissingSignature = "missing_signature" // a signature header is absent
	ReasonUnknownSource    = "unknown_source"    // the source was deleted before verification
	ReasonUnmapped         = "unmapped"          // authentic, but no event type could be read
	ReasonMalformed        = "malformed"         // the captured record cannot be read
	ReasonInternal         = "internal"          // anything unexpected
	// ReasonSecretsUnavailable: the source's secrets do not open with this
	// instance's key file; replay with reverify once the key is back.
	ReasonSecretsUnavailable = "secrets_unavailable"
)

// VerifyError is a verification failure with its reason. Detail is safe to
// store and show: it never holds a secret or a computed signature.
type VerifyError struct {
	Reason string
	Detail string
}

func (e *VerifyError) Error() string { return "inbound: " + e.Reason + ": " + e.Detail }

func fail(reason, format string, args ...any) error {
	return &VerifyError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// ErrUnknownSource is returned for a request to a source that is not configured.
var ErrUnknownSource = &VerifyError{Reason: ReasonUnknownSource, Detail: "no such source"}

// Classify returns the reason for a verification failure: the one place
// that turns errors (ours, the signing package's, net/http's) into the
// reasons stored, listed and counted. nil gives "".
func Classify(err error) string {
	var (
		ve  *VerifyError
		he  *signing.HeaderError
		te  *signing.TimestampError
		me  *signing.MismatchError
		mbe *http.MaxBytesError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ve):
		return ve.Reason
	case errors.As(err, &he):
		if he.Missing {
			return ReasonMissingSignature
		}
		return ReasonBadSignature
	case errors.As(err, &te):
		return ReasonStaleTimestamp
	case errors.As(err, &me):
		return ReasonBadSignature
	case errors.As(err, &mbe):
		return ReasonTooLarge
	}
	return ReasonInternal
}

// Verify checks a request's signature over its raw body with the source's
// scheme and secrets. Timestamps are checked against receivedAt, the time
// the front door took the request, so verifying late (a backlog, a replay)
// judges the request as it was when it arrived. The signature is checked
// before the timestamp, so stale_timestamp always means an authentic but
// old request.
func Verify(src *Source, h http.Header, body []byte, receivedAt time.Time) error {
	if src.heldErr != nil {
		return fail(ReasonSecretsUnavailable, "%v", src.heldErr)
	}
	switch src.Kind {
	case KindStripe:
		return verifyStripe(src, h, body, receivedAt)
	case KindGitHub:
		return verifyGitHub(src, h, body)
	case KindSlack:
		return verifySlack(src, h, body, receivedAt)
	case KindStandard:
		return verifyStandard(src, h, body, receivedAt)
	}
	return fail(ReasonInternal, "unknown source kind %q", src.Kind)
}

func macSHA256(secret string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// anyHexMatch reports whether one of the hex signatures equals the HMAC of
// parts under one of the secrets (constant-time per comparison).
func anyHexMatch(secrets, sigs []string, parts ...[]byte) bool {
	for _, secret := range secrets {
		want := macSHA256(secret, parts...)
		for _, sig := range sigs {
			got, err := hex.DecodeString(sig)
			if err == nil && hmac.Equal(want, got) {
				return true
			}
		}
	}
	return false
}

func checkTolerance(ts, receivedAt time.Time, tolerance time.Duration) error {
	if skew := receivedAt.Sub(ts); skew > tolerance || skew < -tolerance {
		return fail(ReasonStaleTimestamp, "signed at %s, received at %s: more than %s apart",
			ts.UTC().Format(time.RFC3339), receivedAt.UTC().Format(time.RFC3339), tolerance)
	}
	return nil
}

// verifyStripe: Stripe-Signature "t=<unix>,v1=<hex>[,v1=…][,v0=…]", each
// v1 an HMAC-SHA256 of "<t>.<body>" keyed by the whsec_ secret as is.
func verifyStripe(src *Source, h http.Header, body []byte, receivedAt time.Time) error {
	raw := h.Get("Stripe-Signature")
	if raw == "" {
		return fail(ReasonMissingSignature, "no Stripe-Signature header")
	}
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(raw, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fail(ReasonBadSignature, "Stripe-Signature has no valid t=")
	}
	if len(sigs) == 0 {
		return fail(ReasonBadSignature, "Stripe-Signature has no v1 signature")
	}
	if !anyHexMatch(src.Secrets(), sigs, []byte(ts), []byte("."), body) {
		return fail(ReasonBadSignature, "none of %d v1 signatures matches", len(sigs))
	}
	return checkTolerance(time.Unix(unix, 0), receivedAt, src.Tolerance())
}

// verifyGitHub: X-Hub-Signature-256 "sha256=<hex>" of the body. GitHub
// signs no timestamp, so replays within the dedup window are caught by
// X-GitHub-Delivery instead.
func verifyGitHub(src *Source, h http.Header, body []byte) error {
	raw := h.Get("X-Hub-Signature-256")
	if raw == "" {
		return fail(ReasonMissingSignature, "no X-Hub-Signature-256 header")
	}
	sig, ok := strings.CutPrefix(raw, "sha256=")
	if !ok {
		return fail(ReasonBadSignature, "X-Hub-Signature-256 does not start with sha256=")
	}
	if !anyHexMatch(src.Secrets(), []string{sig}, body) {
		return fail(ReasonBadSignature, "X-Hub-Signature-256 does not match")
	}
	return nil
}

// verifySlack: X-Slack-Signature "v0=<hex>" of "v0:<ts>:<body>", ts from
// X-Slack-Request-Timestamp.
func verifySlack(src *Source, h http.Header, body []byte, receivedAt time.Time) error {
	raw, ts := h.Get("X-Slack-Signature"), h.Get("X-Slack-Request-Timestamp")
	if raw == "" || ts == "" {
		return fail(ReasonMissingSignature, "no X-Slack-Signature or X-Slack-Request-Timestamp header")
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fail(ReasonBadSignature, "X-Slack-Request-Timestamp is not a Unix time")
	}
	sig, ok := strings.CutPrefix(raw, "v0=")
	if !ok {
		return fail(ReasonBadSignature, "X-Slack-Signature does not start with v0=")
	}
	if !anyHexMatch(src.Secrets(), []string{sig}, []byte("v0:"+ts+":"), body) {
		return fail(ReasonBadSignature, "X-Slack-Signature does not match")
	}
	return checkTolerance(time.Unix(unix, 0), receivedAt, src.Tolerance())
}

// verifyStandard uses the signing package (the scheme Laneway itself signs
// deliveries with): the signature is checked as of the signed timestamp,
// then the timestamp against the receipt.
func verifyStandard(src *Source, h http.Header, body []byte, receivedAt time.Time) error {
	unix, err := strconv.ParseInt(h.Get(signing.HeaderTimestamp), 10, 64)
	if err != nil {
		if h.Get(signing.HeaderTimestamp) == "" {
			return fail(ReasonMissingSignature, "no webhook-timestamp header")
		}
		return fail(ReasonBadSignature, "webhook-timestamp is not a Unix time")
	}
	ts := time.Unix(unix, 0)
	if err := signing.Verify(h, body, src.Secrets(), time.Second, ts); err != nil {
		if Classify(err) == ReasonMissingSignature {
			return fail(ReasonMissingSignature, "%v", err)
		}
		return fail(ReasonBadSignature, "%v", err)
	}
	return checkTolerance(ts, receivedAt, src.Tolerance())
}
