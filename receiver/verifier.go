package receiver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/laneway/laneway/signing"
)

// Header names of a Laneway delivery. Laneway also sends the webhook-id as
// Idempotency-Key.
const (
	HeaderID        = signing.HeaderID        // "webhook-id": the event id, the same on every attempt
	HeaderTimestamp = signing.HeaderTimestamp // "webhook-timestamp": Unix seconds of this attempt
	HeaderSignature = signing.HeaderSignature // "webhook-signature": "v1,<base64>" per secret, space separated
)

// Delivery is the body of a Laneway delivery.
type Delivery struct {
	// ID is the event id. Laneway sends the same value as webhook-id.
	ID string `json:"id"`
	// Type is the event type, e.g. "order.updated".
	Type string `json:"type"`
	// Timestamp is when the event occurred (its occurred_at), not when this
	// attempt was made.
	Timestamp time.Time `json:"timestamp"`
	// Data is the event's data as the producer published it; "null" if it
	// had none, and nil for an endpoint with thin payloads (which carry
	// no data: fetch the entity's current state instead).
	Data json.RawMessage `json:"data"`
	// Entity is the entity the event is about and its revision.
	Entity Entity `json:"entity"`
}

// Entity names the entity of a delivery and its revision.
type Entity struct {
	ID string `json:"id"`
	// Revision orders the entity's states; 0 means the producer gave none.
	Revision int64 `json:"revision"`
}

// Parse decodes a delivery body. It does not verify anything: call it on a
// body that Verify accepted. Unknown fields are ignored, so that fields
// Laneway adds later do not break receivers.
func Parse(body []byte) (Delivery, error) {
	var d Delivery
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&d); err != nil {
		return Delivery{}, &PayloadError{Reason: "malformed JSON: " + err.Error()}
	}
	if _, err := dec.Token(); err != io.EOF {
		return Delivery{}, &PayloadError{Reason: "trailing data after the JSON object"}
	}
	return d, d.validate()
}

func (d *Delivery) validate() error {
	switch {
	case d.ID == "":
		return &PayloadError{Reason: "id is missing"}
	case d.Type == "":
		return &PayloadError{Reason: "type is missing"}
	case d.Entity.ID == "":
		return &PayloadError{Reason: "entity.id is missing"}
	case d.Entity.Revision < 0:
		return &PayloadError{Reason: "entity.revision is negative"}
	}
	return nil
}

// Verifier checks deliveries' signatures and timestamps. It is safe for
// concurrent use; build one with NewVerifier and keep it.
type Verifier struct {
	signer    *signing.Signer
	tolerance time.Duration
	now       func() time.Time
	maxBody   int64
}

// NewVerifier builds a Verifier from cfg's Secrets, Tolerance, Now and
// MaxBodyBytes; the other fields are ignored. It fails on a missing or
// malformed secret, without quoting it.
func NewVerifier(cfg Config) (*Verifier, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	signer, err := signing.NewSigner(cfg.Secrets)
	if err != nil {
		return nil, err
	}
	return &Verifier{signer: signer, tolerance: cfg.Tolerance, now: cfg.Now, maxBody: cfg.MaxBodyBytes}, nil
}

// Verify checks that h carries a webhook-id, a webhook-timestamp within the
// tolerance of now, and a v1 signature of body made with one of the secrets.
// body must be the raw bytes received: re-encoded JSON does not verify. The
// error is a *VerificationError.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	if err := v.signer.Verify(h, body, v.tolerance, v.now()); err != nil {
		return verificationError(err)
	}
	return nil
}

// ReadRequest reads r's body (at most MaxBodyBytes), verifies it and parses
// it. The error is a *TooLargeError, a *VerificationError or a
// *PayloadError. ReadRequest does not close the body; the http.Server does.
func (v *Verifier) ReadRequest(r *http.Request) (Delivery, error) {
	body, err := v.readBody(r)
	if err != nil {
		return Delivery{}, err
	}
	if err := v.Verify(r.Header, body); err != nil {
		return Delivery{}, err
	}
	return Parse(body)
}

// readBody reads one byte past the limit, so that a body of exactly the
// limit passes and a longer one is detected without reading all of it.
func (v *Verifier) readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > v.maxBody {
		return nil, &TooLargeError{Limit: v.maxBody}
	}
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, v.maxBody+1))
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes), int64(len(body)) > v.maxBody:
		return nil, &TooLargeError{Limit: v.maxBody}
	case err != nil:
		return nil, &PayloadError{Reason: "reading the body: " + err.Error()}
	}
	return body, nil
}
