package receiver

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/laneway/laneway/signing"
)

// constError is an error that can be a constant, so sentinel errors need no
// package-level variables.
type constError string

func (e constError) Error() string { return string(e) }

// Why a request failed verification: the values of VerificationError.Reason.
const (
	ReasonMissingHeader     = "missing_header"     // a webhook-* header is absent
	ReasonMalformedHeader   = "malformed_header"   // webhook-timestamp is not Unix seconds
	ReasonTimestampTooOld   = "timestamp_too_old"  // older than Tolerance: a replay, or a clock behind
	ReasonTimestampTooNew   = "timestamp_too_new"  // ahead by more than Tolerance
	ReasonSignatureMismatch = "signature_mismatch" // no v1 signature matches any secret
)

// VerificationError says that a request is not a fresh delivery signed with
// one of the secrets. The Handler answers 401. Err is the signing package's
// error (*signing.HeaderError, *signing.TimestampError or
// *signing.MismatchError); neither error quotes a secret or the body.
type VerificationError struct {
	Reason string // one of the Reason* constants
	Err    error
}

func (e *VerificationError) Error() string {
	return "receiver: verification failed (" + e.Reason + "): " + e.Err.Error()
}

func (e *VerificationError) Unwrap() error { return e.Err }

// PayloadError says that a verified body is not a Laneway delivery, or that
// the body could not be read. The Handler answers 400.
type PayloadError struct {
	Reason string
}

func (e *PayloadError) Error() string { return "receiver: bad payload: " + e.Reason }

// TooLargeError says that a body is over Config.MaxBodyBytes. The Handler
// answers 413, which makes Laneway dead-letter the delivery.
type TooLargeError struct {
	Limit int64
}

func (e *TooLargeError) Error() string {
	return "receiver: body is over the " + strconv.FormatInt(e.Limit, 10) + " byte limit"
}

// verificationError classifies an error of signing.Signer.Verify.
func verificationError(err error) error {
	var (
		header    *signing.HeaderError
		timestamp *signing.TimestampError
	)
	reason := ReasonSignatureMismatch // *signing.MismatchError, the only other error
	switch {
	case errors.As(err, &header) && header.Missing:
		reason = ReasonMissingHeader
	case errors.As(err, &header):
		reason = ReasonMalformedHeader
	case errors.As(err, &timestamp) && timestamp.Future():
		reason = ReasonTimestampTooNew
	case errors.As(err, &timestamp):
		reason = ReasonTimestampTooOld
	}
	return &VerificationError{Reason: reason, Err: err}
}

// statusOf is the answer to a request that ReadRequest refused.
func statusOf(err error) int {
	var (
		verification *VerificationError
		tooLarge     *TooLargeError
	)
	switch {
	case errors.As(err, &verification):
		return http.StatusUnauthorized
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge
	default:
		return http.StatusBadRequest
	}
}
