package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/laneway/laneway/internal/admin/client"
)

// listing is the result of one or more pages.
type listing[T any] struct {
	items    []T
	rawItems []json.RawMessage // with more than one page: each item's JSON
	next     string
	scanned  int
	raw      json.RawMessage // with one page: the API's document
	pages    int
}

// maxPages bounds --all, so that a runaway listing stops with a message
// rather than never.
const maxPages = 100_000

// collect fetches the page at cursor and, with all, every following page.
func collect[T any](ctx context.Context, cursor string, all bool, fetch func(cursor string) (client.Page[T], error)) (listing[T], error) {
	var l listing[T]
	for {
		p, err := fetch(cursor)
		if err != nil {
			return l, err
		}
		l.pages++
		l.items = append(l.items, p.Data...)
		l.next, l.raw = p.NextCursor, p.Raw
		l.scanned += p.Scanned
		if all {
			var doc struct {
				Data []json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(p.Raw, &doc); err != nil {
				return l, fmt.Errorf("decoding a page: %w", err)
			}
			l.rawItems = append(l.rawItems, doc.Data...)
		}
		if !all || p.NextCursor == "" {
			return l, nil
		}
		if l.pages >= maxPages {
			return l, fmt.Errorf("stopped after %d pages; narrow the search with --since/--until", l.pages)
		}
		if err := ctx.Err(); err != nil {
			return l, err
		}
		cursor = p.NextCursor
	}
}

// writeListingJSON prints one document: the API's page, or with --all every
// page's data merged as {"data":[…],"next_cursor":"","scanned":N}.
func writeListingJSON[T any](w io.Writer, l listing[T], all bool) error {
	if !all {
		return writeJSON(w, l.raw)
	}
	items := l.rawItems
	if items == nil {
		items = []json.RawMessage{}
	}
	return encodeJSON(w, struct {
		Data    []json.RawMessage `json:"data"`
		Next    string            `json:"next_cursor"`
		Scanned int               `json:"scanned"`
	}{items, l.next, l.scanned})
}

// moreHint tells a table reader how to get the next page.
func moreHint(w io.Writer, next string, shown int) {
	if next == "" {
		return
	}
	if shown == 0 {
		fmt.Fprintln(w, "(nothing in the part of the range scanned so far)")
	}
	fmt.Fprintf(w, "More: add --cursor %s (or --all to follow every page).\n", next)
}
