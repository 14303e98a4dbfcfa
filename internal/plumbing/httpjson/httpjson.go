// Package httpjson is the one set of JSON helpers of Laneway's HTTP APIs
// (the admin API and the inbound sources API): answers, errors that name
// the input at fault, and strict request decoding within a size limit.
package httpjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/laneway/laneway/internal/plumbing/jsonerr"
)

// ErrorBody is the JSON every error response carries. Field names the
// input at fault when there is one; Reason is the bare cause of an invalid
// event.
type ErrorBody struct {
	Error  string `json:"error"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// FieldError is an input refused for a reason, naming the field.
type FieldError struct{ Field, Reason string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// InputField names the field at fault.
func (e *FieldError) InputField() string { return e.Field }

// fielded is an error that names the input field at fault (the packages'
// own validation errors implement it).
type fielded interface{ InputField() string }

// Write answers with v as JSON and returns the status (for metrics).
func Write(w http.ResponseWriter, status int, v any) int {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"could not encode the response"}`)
	}
	return WriteRaw(w, status, body)
}

// WriteRaw answers with body, which is already JSON.
func WriteRaw(w http.ResponseWriter, status int, body []byte) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n')) // a failed write means the client left
	return status
}

// Error answers status with msg.
func Error(w http.ResponseWriter, status int, msg string) int {
	return Write(w, status, ErrorBody{Error: msg})
}

// Invalid answers 400 for a refused input, naming the field when the
// error says which one.
func Invalid(w http.ResponseWriter, err error) int {
	body := ErrorBody{Error: err.Error()}
	var f fielded
	if errors.As(err, &f) {
		body.Field = f.InputField()
	}
	return Write(w, http.StatusBadRequest, body)
}

// IsJSON accepts a missing Content-Type (curl -d aside, most clients that
// omit it send JSON) and any JSON media type, including merge-patch+json.
func IsJSON(contentType string) bool {
	if contentType == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// ReadBody reads a JSON request body of at most limit bytes. It answers
// the request itself and returns false when the body cannot be used.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if !IsJSON(r.Header.Get("Content-Type")) {
		Error(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		Error(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit))
		return nil, false
	case err != nil:
		Error(w, http.StatusBadRequest, "could not read the request body")
		return nil, false
	}
	return body, true
}

// ReadStrict reads the body and decodes it strictly into v, answering the
// request itself and returning false when either fails.
func ReadStrict(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body, ok := ReadBody(w, r, limit)
	if !ok {
		return false
	}
	if err := DecodeStrict(body, v); err != nil {
		Invalid(w, err)
		return false
	}
	return true
}

// DecodeStrict decodes exactly one JSON object into v, refusing unknown
// fields so that a typo ("max_concurency") is an error rather than a
// silent default.
func DecodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	// Token, unlike More, also catches a stray '}' or ']' after the object.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &FieldError{Field: "body", Reason: "has data after the JSON object"}
	}
	return nil
}

// decodeError turns an encoding/json error into a message a client can act
// on, naming the field when there is one.
func decodeError(err error) error {
	if field, reason, ok := jsonerr.Field(err); ok {
		return &FieldError{Field: field, Reason: reason}
	}
	if jsonerr.NotAnObject(err) {
		return &FieldError{Field: "body", Reason: "must be a JSON object"}
	}
	if errors.Is(err, io.EOF) {
		return errors.New("request body is empty")
	}
	return fmt.Errorf("malformed JSON: %v", err)
}
