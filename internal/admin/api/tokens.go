package api

import (
	"fmt"
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
// RFC 6750 bearer token of at least MinAdminTokenBytes and must not be one of
// the examples in Laneway's docs. Errors name a token by position, never by
// value.
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
	return nil
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
