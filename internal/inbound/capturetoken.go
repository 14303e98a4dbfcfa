package inbound

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"regexp"
)

// A capture token is an optional, unguessable last segment of a source's
// capture URL: with one set, the source captures at /in/{id}/{token} only,
// and /in/{id} (or a wrong token) gets the same 404 as a source that does
// not exist, before any rate limit of the source is spent and with nothing
// stored. The signature still decides every request; the token keeps a
// sender who only knows (or guesses) the source's id from reaching it at
// all, so it can neither fill the refusal budget nor spend the source's
// rate limit. Tokens are secrets: sealed with the signing secrets, shown
// only by the create, rotate and reveal responses, and never stored with
// the captured requests (their path keeps "{capture_token}" instead).
const (
	captureTokenBytes = 32 // generated: 256 random bits, 43 characters
	redactedToken     = "{capture_token}"
)

var captureTokenPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{32,128}$`)

// NewCaptureToken generates a token: 32 random bytes, base64url.
func NewCaptureToken() string {
	key := make([]byte, captureTokenBytes)
	_, _ = rand.Read(key) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(key)
}

func validateCaptureTokens(current, previous string) error {
	const rule = "must be 32 to 128 of A-Z, a-z, 0-9, '-' and '_'"
	switch {
	case current != "" && !captureTokenPattern.MatchString(current):
		return &ValidationError{"capture_token", rule}
	case previous != "" && !captureTokenPattern.MatchString(previous):
		return &ValidationError{"previous_capture_token", rule}
	case previous != "" && current == "":
		return &ValidationError{"previous_capture_token", "is only accepted beside a capture_token"}
	}
	return nil
}

// requiresToken says whether the source captures at /in/{id}/{token} only.
func (s *Source) requiresToken() bool { return s.CaptureToken != "" || s.heldToken }

// acceptsToken says whether a request to /in/{ID} (token "") or
// /in/{ID}/{token} reaches this source. The comparison is of SHA-256
// digests in constant time, so neither the time taken nor an early exit
// tells a guesser how much of a token (or its length) was right.
func (s *Source) acceptsToken(token string) bool {
	if !s.requiresToken() || token == "" {
		return !s.requiresToken() && token == ""
	}
	if s.heldToken {
		return true // not checkable here: Verify answers secrets_unavailable (503)
	}
	got := sha256.Sum256([]byte(token))
	match := 0
	for _, want := range []string{s.CaptureToken, s.PreviousCaptureToken} {
		if want != "" {
			w := sha256.Sum256([]byte(want))
			match |= subtle.ConstantTimeCompare(got[:], w[:])
		}
	}
	return match == 1
}

// capturePath is the source's capture path: with its token when
// withToken, else with "{capture_token}" in its place.
func (s *Source) capturePath(withToken bool) string {
	switch {
	case !s.requiresToken():
		return "/in/" + s.ID
	case withToken && s.CaptureToken != "":
		return "/in/" + s.ID + "/" + s.CaptureToken
	}
	return "/in/" + s.ID + "/" + redactedToken
}

// storedPath is the path a capture keeps: the request's, with the token
// (if any) replaced, so the inbound topic and the listings never hold it.
func (s *Source) storedPath(r *http.Request) string {
	if r.PathValue("token") == "" {
		if r.RequestURI != "" {
			return r.RequestURI
		}
		return r.URL.RequestURI()
	}
	p := s.capturePath(false)
	if r.URL.RawQuery != "" {
		p += "?" + r.URL.RawQuery
	}
	return p
}
