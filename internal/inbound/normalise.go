package inbound

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/laneway/laneway/internal/model/event"
)

// eventIDSpace namespaces the deterministic event ids of inbound events:
// the same (source, dedup key) always gives the same id, so a duplicate
// that slips past dedup (Redis lost) still carries the first one's
// webhook-id and receivers drop it.
var eventIDSpace = uuid.MustParse("6f1f7a2e-3c55-4d0b-9a51-2b8f6d1c7e90")

// fieldPath is a parsed type_field / entity_field / revision_field.
type fieldPath struct {
	header string   // "header:Name" reads this request header
	keys   []string // otherwise, object keys / array indices into the body
}

// parseFieldPath accepts "a.b.c", "/a/b/c" (JSON pointer, ~0 and ~1
// escapes) and "header:Name".
func parseFieldPath(s string) (fieldPath, error) {
	switch {
	case s == "":
		return fieldPath{}, errors.New("is empty")
	case len(s) > maxFieldLen:
		return fieldPath{}, errors.New("is longer than 256 bytes")
	}
	if name, ok := strings.CutPrefix(s, "header:"); ok {
		if name == "" || strings.ContainsAny(name, " :\r\n") {
			return fieldPath{}, errors.New("names no header")
		}
		return fieldPath{header: http.CanonicalHeaderKey(name)}, nil
	}
	var keys []string
	if strings.HasPrefix(s, "/") {
		for k := range strings.SplitSeq(s[1:], "/") {
			keys = append(keys, strings.ReplaceAll(strings.ReplaceAll(k, "~1", "/"), "~0", "~"))
		}
	} else {
		keys = strings.Split(s, ".")
		for _, k := range keys {
			if k == "" {
				return fieldPath{}, errors.New("has an empty segment (use a JSON pointer for odd keys)")
			}
		}
	}
	return fieldPath{keys: keys}, nil
}

// lookup returns the value at the path as a string: strings as they are,
// numbers as written, booleans as true/false; anything else is absent.
func (f fieldPath) lookup(h http.Header, doc any) (string, bool) {
	if f.header != "" {
		v := h.Get(f.header)
		return v, v != ""
	}
	cur := doc
	for _, k := range f.keys {
		switch node := cur.(type) {
		case map[string]any:
			next, ok := node[k]
			if !ok {
				return "", false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(node) {
				return "", false
			}
			cur = node[i]
		default:
			return "", false
		}
	}
	switch v := cur.(type) {
	case string:
		return v, v != ""
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// normalised is what a verified request becomes.
type normalised struct {
	dedupKey string
	eventID  string
	typ      string
	entity   string
	envelope []byte // the events record value
}

// parsedBody decodes a JSON body for field lookups; nil when the body is
// not JSON (header fields still work).
func parsedBody(body []byte) any {
	if !json.Valid(body) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return nil
	}
	return doc
}

// providerIDs is where each kind's senders put their unique delivery id,
// where the signature covers it: Stripe's and Slack's ids are in the
// signed body, webhook-id is signed by Standard Webhooks. GitHub has none:
// X-GitHub-Delivery is not signed, so anyone holding one captured request
// could resend it under fresh delivery ids and have it forwarded each
// time. GitHub requests are deduplicated on the hash of the signed body
// instead (a redelivery from GitHub carries the same body, so it is still
// a duplicate).
var providerIDs = map[string]fieldPath{
	KindStripe:   {keys: []string{"id"}},       // evt_…
	KindSlack:    {keys: []string{"event_id"}}, // Events API
	KindStandard: {header: http.CanonicalHeaderKey("webhook-id")},
}

// dedupKey is the provider's signed id for the event, else a hash of
// source and body.
func dedupKey(src *Source, h http.Header, body []byte, doc any) string {
	if path, signed := providerIDs[src.Kind]; signed {
		if id, ok := path.lookup(h, doc); ok && len(id) <= maxFieldLen {
			return id
		}
	}
	sum := sha256.Sum256(append([]byte(src.ID+"\x00"), body...))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// normalise maps a verified request to its envelope: the source's tenant,
// the type read at TypeField (renamed by TypeMap, else prefixed), the entity
// at EntityField (else the event id), the revision at RevisionField (else
// 0), occurred_at = receipt, and the body bytes verbatim as data (a body
// that is not JSON goes in as a JSON string).
func normalise(src *Source, c *Capture) (normalised, error) {
	doc := parsedBody(c.Body)
	n := normalised{dedupKey: dedupKey(src, c.Header, c.Body, doc)}
	n.eventID = uuid.NewSHA1(eventIDSpace, []byte(src.ID+"\x00"+n.dedupKey)).String()

	typeField, _ := parseFieldPath(src.TypeField) // validated with the source
	providerType, ok := typeField.lookup(c.Header, doc)
	if !ok {
		return n, fail(ReasonUnmapped, "no event type at %q", src.TypeField)
	}
	if mapped, ok := src.TypeMap[providerType]; ok {
		n.typ = mapped
	} else {
		n.typ = src.TypePrefix + providerType
	}
	if len(n.typ) > maxFieldLen {
		return n, fail(ReasonUnmapped, "event type is longer than %d bytes", maxFieldLen)
	}

	n.entity = n.eventID
	entityField, _ := parseFieldPath(src.EntityField)
	if e, ok := entityField.lookup(c.Header, doc); ok && len(e) <= maxFieldLen {
		n.entity = e
	}
	var revision int64
	if src.RevisionField != "" {
		revField, _ := parseFieldPath(src.RevisionField)
		if v, ok := revField.lookup(c.Header, doc); ok {
			if r, err := strconv.ParseInt(v, 10, 64); err == nil && r >= 0 {
				revision = r
			}
		}
	}

	data := c.Body
	if doc == nil || !utf8.Valid(c.Body) {
		if !utf8.Valid(c.Body) {
			return n, fail(ReasonUnmapped, "body is neither JSON nor UTF-8 text")
		}
		data, _ = json.Marshal(string(c.Body))
	}
	fields := event.Envelope{
		ID: n.eventID, Type: n.typ, Tenant: src.Tenant, Entity: n.entity, Revision: revision,
		Coalesce: src.Coalesce, OccurredAt: c.ReceivedAt.UTC(),
	}
	// The envelope's own rules (a control character in type or entity):
	// refused here, the request is listed as unmapped; forwarded, it would
	// only be dead-lettered by the fan-out.
	if err := fields.Validate(); err != nil {
		return n, fail(ReasonUnmapped, "%v", err)
	}
	env, err := buildEnvelope(fields, data)
	if err != nil {
		return n, err
	}
	n.envelope = env
	return n, nil
}

// buildEnvelope encodes env with data spliced in byte for byte:
// encoding/json would compact a RawMessage (and escape <, > and &), which
// would change the body's whitespace.
func buildEnvelope(env event.Envelope, data []byte) ([]byte, error) {
	env.Data = nil
	head, err := json.Marshal(&env)
	if err != nil {
		return nil, fail(ReasonInternal, "encode envelope: %v", err)
	}
	size := len(head) + len(`,"data":`) + len(data)
	if size > event.MaxEnvelopeBytes {
		return nil, fail(ReasonTooLarge, "the event would be %d bytes; the events topic takes at most %d", size, event.MaxEnvelopeBytes)
	}
	out := make([]byte, 0, size)
	out = append(out, head[:len(head)-1]...) // drop the closing brace
	out = append(out, `,"data":`...)
	out = append(out, data...)
	return append(out, '}'), nil
}
