package event

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// Fast paths for the two decodes on every event's way: the fan-out's
// envelope and the delivery stage's delivery record. encoding/json spent a
// third of Laneway's own CPU on them (reflection, a Decoder per event). The
// fast path reads the plain objects Laneway and its producers write: exact
// field names, strings without escapes, integers, RFC 3339 times. Whatever
// it does not read that simply, it declines, and encoding/json decodes the
// record as before; what it does read, it reads exactly as encoding/json
// would (FuzzFastDeliveryMatchesUnmarshal, FuzzFastEnvelopeMatchesDecoder).

// walkObject calls field with each key and raw value of the JSON object raw,
// in order. It reports false, and the caller falls back, when raw is not a
// plain object (a key with escapes, bad syntax) or field declines a value.
func walkObject(raw []byte, field func(key, value []byte) bool) bool {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return skipSpace(raw, i+1) == len(raw)
	}
	for {
		key, next, ok := plainString(raw, i)
		if !ok {
			return false
		}
		i = skipSpace(raw, next)
		if i >= len(raw) || raw[i] != ':' {
			return false
		}
		i = skipSpace(raw, i+1)
		end, ok := valueEnd(raw, i)
		if !ok || !field(key, raw[i:end]) {
			return false
		}
		i = skipSpace(raw, end)
		if i >= len(raw) {
			return false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return skipSpace(raw, i+1) == len(raw)
		default:
			return false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads the string starting at b[i] when it holds only
// printable ASCII other than the backslash: its content and the index past
// its closing quote.
func plainString(b []byte, i int) (content []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// valueEnd finds where the value starting at b[i] ends, tracking strings
// (with their escapes) and nesting; it does not check the value's syntax,
// which the field readers do for the values they take.
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, ok := stringEnd(b, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	default: // a number or literal: up to the next delimiter
		j := i
		for j < len(b) && !isDelimiter(b[j]) {
			j++
		}
		return j, j > i
	}
}

func isDelimiter(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// stringEnd returns the index past the closing quote of the string at b[i].
func stringEnd(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// Field readers: each takes a value only in the form it reads exactly as
// encoding/json does, and declines anything else.

func readString(v []byte, dst *string) bool {
	s, next, ok := plainString(v, 0)
	if !ok || next != len(v) {
		return false
	}
	*dst = string(s)
	return true
}

func readInt64(v []byte, dst *int64) bool {
	if !plainInteger(v) {
		return false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}

func readInt(v []byte, dst *int) bool {
	var n int64
	if !readInt64(v, &n) || int64(int(n)) != n {
		return false
	}
	*dst = int(n)
	return true
}

// plainInteger: -?(0|[1-9][0-9]*), the JSON integers without fraction or
// exponent.
func plainInteger(v []byte) bool {
	if len(v) > 0 && v[0] == '-' {
		v = v[1:]
	}
	if len(v) == 0 || (v[0] == '0' && len(v) > 1) {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func readBool(v []byte, dst *bool) bool {
	switch string(v) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return false
	}
	return true
}

// readTime takes a plain string and leaves it to time.Time's own
// UnmarshalJSON, as encoding/json does.
func readTime(v []byte, dst *time.Time) bool {
	if _, next, ok := plainString(v, 0); !ok || next != len(v) {
		return false
	}
	return dst.UnmarshalJSON(v) == nil
}

// readRaw keeps a copy of a valid, non-null value, as json.RawMessage's
// decoding does.
func readRaw(v []byte, dst *json.RawMessage) bool {
	if bytes.Equal(v, []byte("null")) || !json.Valid(v) {
		return false
	}
	*dst = bytes.Clone(v)
	return true
}

// fastDelivery decodes raw into d, or reports false having maybe filled
// part of d (the caller then starts over with encoding/json).
func fastDelivery(raw []byte, d *Delivery) bool {
	return walkObject(raw, func(key, v []byte) bool {
		switch string(key) {
		case "event_id":
			return readString(v, &d.EventID)
		case "endpoint_id":
			return readString(v, &d.EndpointID)
		case "tenant":
			return readString(v, &d.Tenant)
		case "type":
			return readString(v, &d.Type)
		case "entity":
			return readString(v, &d.Entity)
		case "revision":
			return readInt64(v, &d.Revision)
		case "coalesce":
			return readBool(v, &d.Coalesce)
		case "occurred_at":
			return readTime(v, &d.OccurredAt)
		case "data":
			return readRaw(v, &d.Data)
		case "created_at":
			return readTime(v, &d.CreatedAt)
		case "attempts":
			return readInt(v, &d.Attempts)
		case "sequence":
			return readInt64(v, &d.Sequence)
		case "not_before":
			return readTime(v, &d.NotBefore)
		case "last_error":
			return readString(v, &d.LastError)
		}
		return false
	})
}

// fastEnvelope decodes raw into env like the strict decoder (unknown
// fields refused: declined here, so the strict decoder says which).
func fastEnvelope(raw []byte, env *Envelope) bool {
	return walkObject(raw, func(key, v []byte) bool {
		switch string(key) {
		case "id":
			return readString(v, &env.ID)
		case "type":
			return readString(v, &env.Type)
		case "tenant":
			return readString(v, &env.Tenant)
		case "entity":
			return readString(v, &env.Entity)
		case "revision":
			return readInt64(v, &env.Revision)
		case "coalesce":
			return readBool(v, &env.Coalesce)
		case "occurred_at":
			return readTime(v, &env.OccurredAt)
		case "data":
			return readRaw(v, &env.Data)
		}
		return false
	})
}
