package event

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// The receiver's body is rendered by hand, once per delivery, because it
// is on every delivery's path: json.Marshal of receiver.Delivery allocated three
// times as much and reflected over the struct. The bytes are the same as
// json.Marshal's for compact data (TestBodyMatchesJSONMarshal), whose
// string escaping this follows: HTML-safe, invalid UTF-8 as U+FFFD.

// bodySize is an upper bound of the rendered body for most deliveries, so
// the buffer is allocated once.
func bodySize(d *Delivery, data []byte) int {
	return 96 + len(d.EventID) + len(d.Type) + len(d.Entity) + len(data) + len(time.RFC3339Nano)
}

func appendBody(b []byte, d *Delivery, data []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, d.EventID)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, d.Type)
	b = append(b, `,"timestamp":"`...)
	b = d.OccurredAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if data != nil { // nil: a thin body
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	b = append(b, `,"entity":{"id":`...)
	b = appendJSONString(b, d.Entity)
	b = append(b, `,"revision":`...)
	b = strconv.AppendInt(b, d.Revision, 10)
	return append(b, "}}"...)
}

// representable reports what time.Time.MarshalJSON would refuse, without
// encoding: a year outside [0,9999] or a zone offset of 24 hours or more.
func representable(t time.Time) error {
	if y := t.Year(); y < 0 || y > 9999 {
		return fmt.Errorf("year %d outside [0,9999]", y)
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		return fmt.Errorf("zone offset %ds outside a day", off)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default: // other control characters and <, >, &
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
