package signing

import (
	"strconv"
	"time"
)

// constError is an error that can be a constant, so sentinel errors need no
// package-level variables.
type constError string

func (e constError) Error() string { return string(e) }

// ErrNoSecrets is returned when there is no secret to sign or verify with.
const ErrNoSecrets = constError("signing: no secrets")

// SecretError reports a malformed secret. It names the secret by its position
// only: the value must never reach a log.
type SecretError struct {
	Index  int    // position in the secrets slice
	Reason string // e.g. "does not start with whsec_"
}

func (e *SecretError) Error() string {
	return "signing: secret #" + strconv.Itoa(e.Index) + " " + e.Reason
}

// HeaderError reports a webhook header that is missing or cannot be parsed.
type HeaderError struct {
	Name    string // HeaderID, HeaderTimestamp or HeaderSignature
	Missing bool   // false: present but malformed
}

func (e *HeaderError) Error() string {
	if e.Missing {
		return "signing: missing " + e.Name + " header"
	}
	return "signing: malformed " + e.Name + " header"
}

// TimestampError reports a webhook-timestamp too far from now: a replayed old
// delivery or a clock far ahead.
type TimestampError struct {
	Timestamp time.Time
	Now       time.Time
	Tolerance time.Duration
}

// Future reports whether the timestamp is ahead of now rather than stale.
func (e *TimestampError) Future() bool { return e.Timestamp.After(e.Now) }

func (e *TimestampError) Error() string {
	if e.Future() {
		return "signing: timestamp is more than " + e.Tolerance.String() + " in the future"
	}
	return "signing: timestamp is more than " + e.Tolerance.String() + " old"
}

// MismatchError reports that no signature matched any secret.
type MismatchError struct {
	Signatures int // number of v1 signatures in the header
}

func (e *MismatchError) Error() string {
	return "signing: none of " + strconv.Itoa(e.Signatures) + " v1 signatures matches"
}
