package endpoint

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"
)

// FeedTokenPrefix starts every feed consumer token, so that a leaked one is
// recognisable (secret scanners) and never mistaken for an admin token.
const FeedTokenPrefix = "lwf_"

// MaxFeedTokens bounds the tokens of one endpoint (a rotation needs two).
const MaxFeedTokens = 10

// FeedToken is a consumer token of a pull endpoint. Only its SHA-256 is
// stored: the token itself is shown once, when it is created.
type FeedToken struct {
	ID        string    `json:"id"`
	Hash      string    `json:"hash"` // hex SHA-256 of the token
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt ends a rotated-out token's validity; zero means never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// NewFeedToken makes a token of 32 random bytes and its stored form.
func NewFeedToken(id string, now time.Time) (token string, stored FeedToken) {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // crypto/rand.Read never fails on supported platforms
	token = FeedTokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	return token, FeedToken{ID: id, Hash: hashFeedToken(token), CreatedAt: now}
}

func hashFeedToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// FeedTokenValid reports whether token is one of the endpoint's consumer
// tokens and has not expired at now. Every stored hash is compared in
// constant time, so the answer's timing tells nothing about which matched.
func (e *Endpoint) FeedTokenValid(token string, now time.Time) bool {
	if !e.Pull() || !strings.HasPrefix(token, FeedTokenPrefix) {
		return false
	}
	got := []byte(hashFeedToken(token))
	ok := false
	for _, t := range e.FeedTokens {
		match := subtle.ConstantTimeCompare(got, []byte(t.Hash)) == 1
		if match && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt)) {
			ok = true
		}
	}
	return ok
}

func validateFeedTokens(ts []FeedToken) error {
	if len(ts) > MaxFeedTokens {
		return &ValidationError{"feed_tokens", "at most 10 per endpoint: revoke one first"}
	}
	for _, t := range ts {
		if t.ID == "" || len(t.Hash) != 2*sha256.Size {
			return &ValidationError{"feed_tokens", "entries need an id and a SHA-256 hash"}
		}
	}
	return nil
}
