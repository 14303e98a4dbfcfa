// Package reqtarget keeps the path and query of an endpoint URL to what a
// request line can carry as written: the characters RFC 3986 allows there.
// A raw space would end the request-target early, a control character or
// a non-ASCII byte makes the line malformed, and strict servers refuse the
// characters RFC 3986 leaves out ("{", "|", "[" and the like) with a 400
// that would be retried as the receiver's fault. The API refuses such a
// URL (Valid); the sender escapes one stored before it did (Escape).
package reqtarget

import "strings"

// allowed holds the bytes a path or query may carry as they are: RFC 3986's
// unreserved and sub-delims characters, ":", "@", "/" and "?". "%" is
// allowed only as the start of an escape, see at.
var allowed = func() (a [256]bool) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?" {
		a[c] = true
	}
	return a
}()

// Valid reports whether t, a path and query, can be sent in a request line
// as it is.
func Valid(t string) bool {
	for i := range len(t) {
		if !at(t, i) {
			return false
		}
	}
	return true
}

// Escape returns t with each byte Valid refuses percent-encoded: a space as
// %20, "é" as %C3%A9, a "%" that starts no escape as %25. Escapes already
// in t are kept, so a valid t comes back as it is.
func Escape(t string) string {
	if Valid(t) {
		return t
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(t) + 16)
	for i := range len(t) {
		if c := t[i]; at(t, i) {
			b.WriteByte(c)
		} else {
			b.Write([]byte{'%', hex[c>>4], hex[c&15]})
		}
	}
	return b.String()
}

// at reports whether the byte at i of t may stay as it is.
func at(t string, i int) bool {
	if t[i] == '%' {
		return i+2 < len(t) && isHex(t[i+1]) && isHex(t[i+2])
	}
	return allowed[t[i]]
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
