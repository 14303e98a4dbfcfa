// Package feed stores and serves the ordered feeds of pull endpoints.
//
// Each pull endpoint has its own single-partition topic (topics.Config.Feed).
// The delivery stage's owner of the endpoint appends each delivery to it,
// one entity's revisions one at a time and in order, with an idempotent
// producer, so the topic's offsets are the feed's sequence numbers: they
// increase strictly, never repeat and leave no gap. A state superseded
// while it waited in its lane (coalescing) is never appended; the feed
// itself is never compacted (topics.Config.FeedConfigs says why).
// A page is one fetch from the cursor's offset, so its cost is the page's,
// whatever other endpoints carry; a long poll waits on a Watcher, not on
// a broker connection. The acknowledged position of each feed is the
// offset of its topic in the memberless group topics.Groups.Feed.
//
// docs/architecture.md ("Pull feeds") explains the choice against an index.
package feed

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// cursorPrefix versions the cursor format.
const cursorPrefix = "fc1_"

// Cursor is the opaque form of a feed offset handed to consumers. It
// survives restarts and rebalances because the offset does.
func Cursor(offset int64) string {
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(binary.AppendUvarint(nil, uint64(offset)))
}

// ErrBadCursor is a cursor this package did not make.
var ErrBadCursor = errors.New("not a feed cursor")

// ParseCursor returns the offset a Cursor encodes.
func ParseCursor(s string) (int64, error) {
	if len(s) <= len(cursorPrefix) || s[:len(cursorPrefix)] != cursorPrefix {
		return 0, ErrBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(s[len(cursorPrefix):])
	if err != nil {
		return 0, ErrBadCursor
	}
	off, n := binary.Uvarint(raw)
	if n != len(raw) || n <= 0 || off > 1<<62 {
		return 0, ErrBadCursor
	}
	return int64(off), nil
}

// ExpiredError is a read from before the feed's oldest retained event.
type ExpiredError struct{ Oldest int64 }

func (e *ExpiredError) Error() string {
	return "the cursor is older than the feed's retention; the oldest valid cursor is " + Cursor(e.Oldest)
}

// AheadError is a cursor past the feed's end: not one this feed gave out.
type AheadError struct{ End int64 }

func (e *AheadError) Error() string {
	return fmt.Sprintf("the cursor is past the feed's end (%s events)", strconv.FormatInt(e.End, 10))
}
