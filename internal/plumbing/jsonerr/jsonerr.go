// Package jsonerr turns encoding/json decoding errors into what a client
// can act on: the field at fault and what is wrong with it. The API, the
// inbound door's admin routes and the event envelope all report them the
// same way.
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Field returns the JSON field a decoding error is about and what is wrong
// with it ("must be an integer, not string", "is not a known field"); ok is
// false when the error names no field (a syntax error, an empty body, a
// value that is not an object at all).
func Field(err error) (field, reason string, ok bool) {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return typeErr.Field, fmt.Sprintf("must be %s, not %s", kind(typeErr.Type), typeErr.Value), true
	}
	// encoding/json has no typed error for unknown fields; its text is
	// `json: unknown field "name"`.
	if name, found := strings.CutPrefix(err.Error(), "json: unknown field "); found {
		return strings.Trim(name, `"`), "is not a known field", true
	}
	return "", "", false
}

// NotAnObject reports whether err says the JSON value is of the wrong type
// as a whole (an array or a string where an object belongs).
func NotAnObject(err error) bool {
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &typeErr) && typeErr.Field == ""
}

func kind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array"
	}
	return t.String()
}
