package api

import (
	"fmt"
	"math"
	"strings"
)

// MinAdminTokenBytes is the shortest admin token ParseAdminTokens accepts:
// 32 bytes, e.g. `openssl rand -hex 16` or, better, `openssl rand -hex 32`.
const MinAdminTokenBytes = 32

// MaxAdminTokens is how many tokens may be accepted at once: the new and
// the old one during a rotation.
const MaxAdminTokens = 2

// placeholders are fragments of the example tokens in Laneway's own docs,
// manifests and compose files. A copied example is a published token.
var placeholders = []string{"replace-me", "replace_me", "change-me", "change_me", "changeme", "your-token", "your_token"}

// ParseAdminTokens reads admin tokens as an operator gives them: one, or
// two during a rotation, separated by a comma or a newline (a token file may
// end with a newline). Empty input means no token. Each token must be an
// RFC 6750 bearer token of at least MinAdminTokenBytes, must not be one of
// the examples in Laneway's docs and must not be guessable (checkGuessable).
// Errors name a token by position, never by value.
func ParseAdminTokens(s string) ([]string, error) {
	var tokens []string
	for _, t := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if t = strings.TrimSpace(t); t != "" {
			tokens = append(tokens, t)
		}
	}
	if len(tokens) > MaxAdminTokens {
		return nil, fmt.Errorf("%d admin tokens given; at most %d are accepted (the new and the old one during a rotation)", len(tokens), MaxAdminTokens)
	}
	for i, t := range tokens {
		if err := checkAdminToken(t); err != nil {
			return nil, fmt.Errorf("admin token %d of %d: %w (generate one with: openssl rand -hex 32)", i+1, len(tokens), err)
		}
	}
	return tokens, nil
}

func checkAdminToken(t string) error {
	if len(t) < MinAdminTokenBytes {
		return fmt.Errorf("is %d bytes, at least %d are required", len(t), MinAdminTokenBytes)
	}
	lower := strings.ToLower(t)
	for _, p := range placeholders {
		if strings.Contains(lower, p) {
			return fmt.Errorf("is the example placeholder from Laneway's docs (it contains %q)", p)
		}
	}
	if !bearerToken(t) {
		return fmt.Errorf("may hold only letters, digits and - . _ ~ + / (then = padding), as a bearer token does")
	}
	return checkGuessable(t)
}

// Strength thresholds. Random tokens clear them with a wide margin (32 hex
// characters: about 14 distinct, 115 bits by the estimate below); what a
// person types to fill 32 bytes does not.
const (
	minDistinctChars = 8
	// maxRepeatShare is the share of characters that may equal the one a
	// fixed distance before them: "passwordpassword…" is 100% at 8.
	maxRepeatShare = 0.6
	// maxSequenceShare is the share of steps that may continue a run of
	// equal, non-zero steps: "abcdef…", "0123…".
	maxSequenceShare = 0.3
	// minEstimatedBits bounds the length times the Shannon entropy of the
	// token's own character frequencies: an estimate of what a guesser who
	// knew the character distribution would face.
	minEstimatedBits = 80
)

// checkGuessable refuses tokens long enough but made by hand: few distinct
// characters, a repeated pattern, a sequence, or too little entropy. A
// length check alone let 32 × "a" and "passwordpassword…" start a
// production instance.
func checkGuessable(t string) error {
	if n := distinctChars(t); n < minDistinctChars {
		return fmt.Errorf("has only %d distinct characters, at least %d are required", n, minDistinctChars)
	}
	if p, share := mostRepeated(t); share > maxRepeatShare {
		return fmt.Errorf("repeats itself (%.0f%% of its characters equal the one %d before)", 100*share, p)
	}
	if share := sequenceShare(t); share > maxSequenceShare {
		return fmt.Errorf("is mostly a sequence (%.0f%% of its steps continue a run like abc or 123)", 100*share)
	}
	if bits := estimatedBits(t); bits < minEstimatedBits {
		return fmt.Errorf("has about %.0f bits of entropy by its character frequencies, at least %d are required", bits, minEstimatedBits)
	}
	return nil
}

func distinctChars(t string) int {
	var seen [256]bool
	n := 0
	for i := 0; i < len(t); i++ {
		if !seen[t[i]] {
			seen[t[i]], n = true, n+1
		}
	}
	return n
}

// mostRepeated returns the distance p (up to half the token) at which the
// most characters equal the one p before them, and their share.
func mostRepeated(t string) (int, float64) {
	best, bestShare := 0, 0.0
	for p := 1; p <= len(t)/2; p++ {
		same := 0
		for i := p; i < len(t); i++ {
			if t[i] == t[i-p] {
				same++
			}
		}
		if share := float64(same) / float64(len(t)-p); share > bestShare {
			best, bestShare = p, share
		}
	}
	return best, bestShare
}

// sequenceShare is the share of steps t[i-1]→t[i] equal to the step before
// them and not zero (zero steps are repeats, counted by mostRepeated).
func sequenceShare(t string) float64 {
	if len(t) < 3 {
		return 0
	}
	run := 0
	for i := 2; i < len(t); i++ {
		step := int(t[i]) - int(t[i-1])
		if step != 0 && step == int(t[i-1])-int(t[i-2]) {
			run++
		}
	}
	return float64(run) / float64(len(t)-2)
}

// estimatedBits is len(t) times the Shannon entropy of t's character
// frequencies.
func estimatedBits(t string) float64 {
	var counts [256]int
	for i := 0; i < len(t); i++ {
		counts[t[i]]++
	}
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(len(t))
			h -= p * math.Log2(p)
		}
	}
	return h * float64(len(t))
}

// bearerToken reports whether t has the b64token syntax of RFC 6750, the
// only tokens an Authorization: Bearer header can carry as they are.
func bearerToken(t string) bool {
	body := strings.TrimRight(t, "=")
	if body == "" {
		return false
	}
	for _, r := range body {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("-._~+/", r):
		default:
			return false
		}
	}
	return true
}
