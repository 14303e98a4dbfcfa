// Package urlredact hides the credentials of a connection string that may
// be mistyped: what url.URL.Redacted does for a well-formed URL, done on
// the text, so that "rediss//user:pw@host" or "redis:/user:pw@host" (which
// parse, with the password in the path) are redacted too.
package urlredact

import "strings"

// Mask is what a redacted secret becomes.
const Mask = "xxxxx"

// Userinfo returns s with the credentials before its last '@' replaced by
// Mask, and the text it replaced (empty when s has no '@'). The user info
// starts after the last "//" before the '@', else after the first '/', else
// at the start of s: its part after the first ':' is the password; without
// a ':' the whole of it may be one (a token), so all of it is masked. The
// last '@' ends it, as a host holds no '@' and a password may.
func Userinfo(s string) (redacted, secret string) {
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return s, ""
	}
	start := userinfoStart(s[:at])
	if colon := strings.IndexByte(s[start:at], ':'); colon >= 0 {
		start += colon + 1
	}
	if start == at {
		return s, "" // "user:@host": nothing to hide
	}
	return s[:start] + Mask + s[at:], s[start:at]
}

// userinfoStart is where the user info of s (the text before the '@')
// begins.
func userinfoStart(s string) int {
	if i := strings.LastIndex(s, "//"); i >= 0 {
		return i + 2
	}
	return strings.IndexByte(s, '/') + 1 // 0 without a '/'
}

// Scrub returns msg with every occurrence of raw's secret (see Userinfo)
// replaced by Mask: for errors of parsers that quote a part of raw.
func Scrub(msg, raw string) string {
	redacted, secret := Userinfo(raw)
	if secret == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, raw, redacted)
	return strings.ReplaceAll(msg, secret, Mask)
}
