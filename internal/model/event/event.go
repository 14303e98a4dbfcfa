// Package event defines the records Laneway moves through Kafka: the event
// envelope producers publish, the per-endpoint delivery that the fan-out stage
// writes, and the dead letter that ends a delivery that could not be made.
//
// All three are JSON so that producers, operators and tools such as kcat can
// read and write them without a schema registry.
package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/laneway/laneway/internal/plumbing/jsonerr"
)

// Limits on envelope fields. They keep one bad producer from filling memory or
// the topic with records no receiver could use.
const (
	MaxEnvelopeBytes = 256 << 10 // whole record value
	MaxFieldLen      = 256       // id, type, tenant, entity
)

// Envelope is the value of a record on the events topic and the body of
// POST /v1/events. The record key is Entity.
type Envelope struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Tenant     string          `json:"tenant"`
	Entity     string          `json:"entity"`
	Revision   int64           `json:"revision"`
	Coalesce   bool            `json:"coalesce,omitempty"`
	OccurredAt time.Time       `json:"occurred_at"`
	Data       json.RawMessage `json:"data,omitempty"`
}

// InvalidError says why an envelope was refused. Its text is safe to return
// to the producer and to store as a dead letter's reason detail.
type InvalidError struct {
	// Field names the envelope field at fault ("entity", "revision"…);
	// empty when the event as a whole is refused (size, encoding, syntax).
	Field  string
	Reason string
}

func (e *InvalidError) Error() string { return "invalid event: " + e.Reason }

func invalid(format string, args ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}

func invalidField(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// IsInvalid reports whether err is an *InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// ParseEnvelope decodes and validates an envelope. A missing id is generated
// and a missing occurred_at is set to now, so the returned envelope is
// complete and can be re-encoded as is.
func ParseEnvelope(raw []byte, now time.Time) (Envelope, error) {
	var env Envelope
	if len(raw) > MaxEnvelopeBytes {
		return env, invalid("event is %d bytes, the limit is %d", len(raw), MaxEnvelopeBytes)
	}
	if !utf8.Valid(raw) {
		return env, invalid("event is not valid UTF-8")
	}
	if !fastEnvelope(raw, &env) {
		env = Envelope{}
		if err := decodeEnvelopeStrictly(raw, &env); err != nil {
			return env, err
		}
	}
	grown := encodedGrowth(raw)
	if env.ID == "" {
		env.ID = uuid.NewString()
		grown += len(`,"id":""`) + len(env.ID)
	}
	if env.OccurredAt.IsZero() {
		env.OccurredAt = now.UTC()
		grown += len(`,"occurred_at":""`) + len(time.RFC3339Nano)
	}
	if len(raw)+grown > MaxEnvelopeBytes {
		// Accepted now, it would be refused once re-encoded downstream.
		return env, invalid("event would be up to %d bytes once encoded (HTML-safe escaping, defaults filled), the limit is %d",
			len(raw)+grown, MaxEnvelopeBytes)
	}
	if err := representable(env.OccurredAt); err != nil {
		return env, invalidField("occurred_at", "occurred_at cannot be represented: %v", err)
	}
	return env, env.Validate()
}

// decodeEnvelopeStrictly is encoding/json's decode, refusing unknown
// fields and trailing data: what the fast path declines comes here, and
// here its errors come from.
func decodeEnvelopeStrictly(raw []byte, env *Envelope) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(env); err != nil {
		return malformed(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("trailing data after the JSON object")
	}
	return nil
}

// malformed names the field a decoding error is about when it names one: a
// value of the wrong type, or a field the envelope does not have.
func malformed(err error) error {
	if field, _, ok := jsonerr.Field(err); ok {
		return invalidField(field, "malformed JSON: %v", err)
	}
	return invalid("malformed JSON: %v", err)
}

// encodedGrowth bounds how much longer raw gets when Go's encoder writes
// it again: <, > and & become \u00XX (5 more bytes each), and U+2028 and
// U+2029 become \u2028 and \u2029 (3 more bytes each).
func encodedGrowth(raw []byte) int {
	n := 5 * (bytes.Count(raw, []byte("<")) + bytes.Count(raw, []byte(">")) + bytes.Count(raw, []byte("&")))
	return n + 3*(bytes.Count(raw, []byte("\u2028"))+bytes.Count(raw, []byte("\u2029")))
}

// Validate checks the fields every envelope needs.
func (e *Envelope) Validate() error {
	for _, f := range []struct{ name, value string }{
		{"id", e.ID}, {"type", e.Type}, {"tenant", e.Tenant}, {"entity", e.Entity},
	} {
		if strings.TrimSpace(f.value) == "" {
			return invalidField(f.name, "%s is required", f.name)
		}
		if len(f.value) > MaxFieldLen {
			return invalidField(f.name, "%s is longer than %d bytes", f.name, MaxFieldLen)
		}
		if i := strings.IndexFunc(f.value, unicode.IsControl); i >= 0 {
			// The id becomes the webhook-id header, where CR or LF would end
			// it; a delivery that can never be sent would be retried until it
			// died, holding every later event of its entity. The other
			// fields keep the same rule so that no door needs its own.
			r, _ := utf8.DecodeRuneInString(f.value[i:])
			return invalidField(f.name, "%s holds a control character (%U at byte %d)", f.name, r, i)
		}
	}
	if e.Revision < 0 {
		return invalidField("revision", "revision must not be negative")
	}
	if len(e.Data) > 0 && !json.Valid(e.Data) {
		return invalidField("data", "data is not valid JSON")
	}
	return nil
}

// Delivery is one (event, endpoint) pair: the value of a record on
// laneway.deliveries (key = endpoint id), and later on laneway.parked.
type Delivery struct {
	EventID    string          `json:"event_id"`
	EndpointID string          `json:"endpoint_id"`
	Tenant     string          `json:"tenant"`
	Type       string          `json:"type"`
	Entity     string          `json:"entity"`
	Revision   int64           `json:"revision"`
	Coalesce   bool            `json:"coalesce,omitempty"`
	OccurredAt time.Time       `json:"occurred_at"`
	Data       json.RawMessage `json:"data,omitempty"`

	// CreatedAt is when the delivery was first written (fan-out time); the
	// 72 h age limit counts from here.
	CreatedAt time.Time `json:"created_at"`
	// Attempts already made (non-zero for redriven or parked deliveries).
	Attempts int `json:"attempts,omitempty"`
	// Sequence is a batch endpoint's sequence of the delivery, once it has
	// one (a dead letter keeps it, so a redrive sends the same); 0: none.
	Sequence int64 `json:"sequence,omitempty"`
	// NotBefore delays the next attempt (retry backoff carried across parking).
	NotBefore time.Time `json:"not_before,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// NewDelivery builds the delivery of env to one endpoint.
func NewDelivery(env Envelope, endpointID string, now time.Time) Delivery {
	return Delivery{
		EventID: env.ID, EndpointID: endpointID, Tenant: env.Tenant, Type: env.Type,
		Entity: env.Entity, Revision: env.Revision, Coalesce: env.Coalesce,
		OccurredAt: env.OccurredAt, Data: env.Data, CreatedAt: now.UTC(),
	}
}

// ParseDelivery decodes a delivery record value.
func ParseDelivery(raw []byte) (Delivery, error) {
	var d Delivery
	if !fastDelivery(raw, &d) {
		d = Delivery{}
		if err := json.Unmarshal(raw, &d); err != nil {
			return d, invalid("malformed delivery: %v", err)
		}
	}
	if d.EventID == "" || d.EndpointID == "" || d.Entity == "" {
		return d, invalid("delivery lacks event_id, endpoint_id or entity")
	}
	return d, nil
}

// Body renders the payload the receiver gets for this delivery.
func (d *Delivery) Body() ([]byte, error) { return d.Render(false) }

// Render renders the body, without data when thin: a thin body carries
// only id, type, timestamp and entity {id, revision}.
func (d *Delivery) Render(thin bool) ([]byte, error) {
	data := d.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	if thin {
		data = nil
	} else if !json.Valid(data) {
		return nil, invalid("delivery data is not valid JSON")
	}
	if err := representable(d.OccurredAt); err != nil {
		return nil, invalid("occurred_at cannot be represented: %v", err)
	}
	return appendBody(make([]byte, 0, bodySize(d, data)), d, data), nil
}

// Dead-letter reasons.
const (
	ReasonInvalidEvent     = "invalid_event"
	ReasonMaxAttempts      = "max_attempts"
	ReasonMaxAge           = "max_age"
	ReasonGone             = "gone"              // 410 from the receiver
	ReasonTooLarge         = "payload_too_large" // 413 from the receiver
	ReasonEndpointDisabled = "endpoint_disabled"
	ReasonEndpointDeleted  = "endpoint_deleted"
	ReasonInvalidDelivery  = "invalid_delivery"
)

// DeadLetter is the value of a record on laneway.dead (key = endpoint id, or
// the original key for invalid events). It keeps everything needed to redrive.
type DeadLetter struct {
	ID         string    `json:"id"`
	Reason     string    `json:"reason"`
	Detail     string    `json:"detail,omitempty"`
	DeadAt     time.Time `json:"dead_at"`
	EndpointID string    `json:"endpoint_id,omitempty"`
	Delivery   *Delivery `json:"delivery,omitempty"`
	// Raw holds the original record value when it could not be parsed, cut
	// to MaxDeadRawBytes (see SetRaw).
	Raw []byte `json:"raw,omitempty"`
	// RawSize is the original value's size when Raw was cut.
	RawSize int `json:"raw_size,omitempty"`
	// Source says where the raw record came from, as topic/partition/offset.
	Source string `json:"source,omitempty"`
}

// MaxDeadRawBytes bounds the raw record a dead letter keeps. Raw bytes are
// base64 in the letter (4/3 larger); a record near Kafka's size limit kept
// whole would make a dead letter Kafka refuses, and the stage that writes
// it would retry forever.
const MaxDeadRawBytes = 256 << 10

// SetRaw keeps raw in the letter, cut to MaxDeadRawBytes.
func (l *DeadLetter) SetRaw(raw []byte) {
	if len(raw) > MaxDeadRawBytes {
		l.Raw, l.RawSize = raw[:MaxDeadRawBytes], len(raw)
		return
	}
	l.Raw = raw
}

// UnreadableRecord is the dead letter of a record that could not be read
// (reason ReasonInvalidEvent or ReasonInvalidDelivery; endpointID empty for
// an event): its id and source name the record's place in Kafka, which
// makes the letter idempotent when the record is read again, and its raw
// value is kept (see SetRaw) for the operator and for a redrive.
func UnreadableRecord(reason, topic string, partition int32, offset int64, value []byte, endpointID string, cause error, at time.Time) DeadLetter {
	l := DeadLetter{
		ID:     fmt.Sprintf("%s-%d-%d", topic, partition, offset),
		Reason: reason, Detail: cause.Error(), DeadAt: at.UTC(), EndpointID: endpointID,
		Source: fmt.Sprintf("%s/%d/%d", topic, partition, offset),
	}
	l.SetRaw(value)
	return l
}

// DeliveryEncoder encodes one event's deliveries: the JSON is built once
// and only the endpoint id differs, which spares the fan-out a full encode
// (and a re-validation of the payload) per endpoint. Reset reuses it for
// the next event, so that the fan-out's one encoder allocates only the
// records it returns.
type DeliveryEncoder struct {
	buf   []byte // the record without its endpoint id
	split int    // where the endpoint id goes in buf
}

// NewDeliveryEncoder prepares the deliveries of env created at now.
func NewDeliveryEncoder(env Envelope, now time.Time) (*DeliveryEncoder, error) {
	e := &DeliveryEncoder{}
	return e, e.Reset(env, now)
}

// Reset prepares the deliveries of env created at now. The record is
// written by hand, in json.Marshal's bytes for a Delivery
// (FuzzDeliveryEncoderMatchesJSONMarshal): it is on every event's path.
func (e *DeliveryEncoder) Reset(env Envelope, now time.Time) error {
	d := NewDelivery(env, "", now)
	b := appendJSONString(append(e.buf[:0], `{"event_id":`...), d.EventID)
	b = append(b, `,"endpoint_id":`...)
	e.split = len(b)
	b, err := appendDeliveryTail(b, &d)
	if err != nil {
		return err
	}
	e.buf = b
	return nil
}

// MarshalDelivery is json.Marshal(d), written by hand in the same bytes
// (FuzzMarshalDeliveryMatchesJSONMarshal): a batch endpoint's every
// delivery is encoded whole on its way to the endpoint's feed.
func MarshalDelivery(d *Delivery) ([]byte, error) {
	b := make([]byte, 0, 256+len(d.EventID)+len(d.EndpointID)+len(d.Tenant)+len(d.Type)+len(d.Entity)+len(d.Data)+len(d.LastError))
	b = appendJSONString(append(b, `{"event_id":`...), d.EventID)
	b = appendJSONString(append(b, `,"endpoint_id":`...), d.EndpointID)
	return appendDeliveryTail(b, d)
}

// appendDeliveryTail appends d's fields after endpoint_id and the closing
// brace, as json.Marshal writes them.
func appendDeliveryTail(b []byte, d *Delivery) ([]byte, error) {
	for _, t := range []time.Time{d.OccurredAt, d.CreatedAt, d.NotBefore} {
		if err := representable(t); err != nil {
			return nil, err
		}
	}
	data, err := compactHTMLSafe(d.Data)
	if err != nil {
		return nil, err
	}
	b = appendJSONString(append(b, `,"tenant":`...), d.Tenant)
	b = appendJSONString(append(b, `,"type":`...), d.Type)
	b = appendJSONString(append(b, `,"entity":`...), d.Entity)
	b = strconv.AppendInt(append(b, `,"revision":`...), d.Revision, 10)
	if d.Coalesce {
		b = append(b, `,"coalesce":true`...)
	}
	b = appendJSONTime(append(b, `,"occurred_at":`...), d.OccurredAt)
	if len(data) > 0 {
		b = append(append(b, `,"data":`...), data...)
	}
	b = appendJSONTime(append(b, `,"created_at":`...), d.CreatedAt)
	if d.Attempts != 0 {
		b = strconv.AppendInt(append(b, `,"attempts":`...), int64(d.Attempts), 10)
	}
	if d.Sequence != 0 {
		b = strconv.AppendInt(append(b, `,"sequence":`...), d.Sequence, 10)
	}
	if !d.NotBefore.IsZero() {
		b = appendJSONTime(append(b, `,"not_before":`...), d.NotBefore)
	}
	if d.LastError != "" {
		b = appendJSONString(append(b, `,"last_error":`...), d.LastError)
	}
	return append(b, '}'), nil
}

// appendJSONTime appends t as time.Time's MarshalJSON does (representable
// checked by the caller).
func appendJSONTime(b []byte, t time.Time) []byte {
	return append(t.AppendFormat(append(b, '"'), time.RFC3339Nano), '"')
}

// compactHTMLSafe is data as json.Marshal writes a json.RawMessage:
// compacted, with <, >, &, U+2028 and U+2029 escaped. Data already so is
// returned as it is.
func compactHTMLSafe(data json.RawMessage) ([]byte, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if !bytes.ContainsAny(data, " \t\n\r<>&\u2028\u2029") {
		if !json.Valid(data) {
			return nil, invalid("data is not valid JSON")
		}
		return data, nil
	}
	var compact, safe bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return nil, err
	}
	json.HTMLEscape(&safe, compact.Bytes())
	return safe.Bytes(), nil
}

// Encode returns the delivery record value for one endpoint.
func (e *DeliveryEncoder) Encode(endpointID string) []byte {
	out := make([]byte, 0, len(e.buf)+len(endpointID)+2)
	out = append(out, e.buf[:e.split]...)
	out = appendJSONString(out, endpointID) // as json.Marshal quotes it
	return append(out, e.buf[e.split:]...)
}
