package jsonerr

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestField(t *testing.T) {
	type target struct {
		Revision int64    `json:"revision"`
		Name     string   `json:"name"`
		Tags     []string `json:"tags"`
	}
	for _, tc := range []struct {
		body, field, reason string
		ok, notObject       bool
	}{
		{body: `{"revision":"7"}`, field: "revision", reason: "must be an integer, not string", ok: true},
		{body: `{"name":7}`, field: "name", reason: "must be a string, not number", ok: true},
		{body: `{"tags":"x"}`, field: "tags", reason: "must be an array, not string", ok: true},
		{body: `{"colour":"red"}`, field: "colour", reason: "is not a known field", ok: true},
		{body: `[1,2]`, notObject: true},
		{body: `{"name":`},
	} {
		dec := json.NewDecoder(strings.NewReader(tc.body))
		dec.DisallowUnknownFields()
		var v target
		err := dec.Decode(&v)
		if err == nil {
			t.Fatalf("%s: decoded", tc.body)
		}
		field, reason, ok := Field(err)
		if field != tc.field || reason != tc.reason || ok != tc.ok || NotAnObject(err) != tc.notObject {
			t.Errorf("%s: Field = %q, %q, %t; NotAnObject %t (error %v)", tc.body, field, reason, ok, NotAnObject(err), err)
		}
	}
}
