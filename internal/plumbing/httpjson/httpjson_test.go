package httpjson

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type target struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func readStrict(t *testing.T, contentType, body string, limit int64) (*httptest.ResponseRecorder, bool) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	var v target
	return w, ReadStrict(w, r, limit, &v)
}

// Every refusal answers with a status and a reason, naming the field when
// there is one; a good body decodes.
func TestReadStrict(t *testing.T) {
	for _, c := range []struct {
		name, contentType, body string
		status                  int
		field                   string
	}{
		{"ok", "application/json", `{"name":"a","count":1}`, 0, ""},
		{"merge patch", "application/merge-patch+json", `{"name":"a"}`, 0, ""},
		{"form", "application/x-www-form-urlencoded", `name=a`, http.StatusUnsupportedMediaType, ""},
		{"too large", "", `{"name":"` + strings.Repeat("x", 100) + `"}`, http.StatusRequestEntityTooLarge, ""},
		{"unknown field", "", `{"nmae":"a"}`, http.StatusBadRequest, "nmae"},
		{"wrong type", "", `{"count":"x"}`, http.StatusBadRequest, "count"},
		{"not an object", "", `[1]`, http.StatusBadRequest, "body"},
		{"trailing data", "", `{"name":"a"}}`, http.StatusBadRequest, "body"},
		{"empty", "", ``, http.StatusBadRequest, ""},
	} {
		w, ok := readStrict(t, c.contentType, c.body, 64)
		if ok != (c.status == 0) {
			t.Errorf("%s: ok = %v, status %d %s", c.name, ok, w.Code, w.Body)
			continue
		}
		if c.status == 0 {
			continue
		}
		var e ErrorBody
		if w.Code != c.status || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error == "" || e.Field != c.field {
			t.Errorf("%s: %d %s, want %d with field %q", c.name, w.Code, w.Body, c.status, c.field)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", c.name, ct)
		}
	}
}

type ownError struct{ field string }

func (e *ownError) Error() string      { return "bad " + e.field }
func (e *ownError) InputField() string { return e.field }

// A package's own validation error names its field through InputField.
func TestInvalidNamesTheField(t *testing.T) {
	w := httptest.NewRecorder()
	if status := Invalid(w, &ownError{"url"}); status != http.StatusBadRequest {
		t.Fatalf("status %d", status)
	}
	var e ErrorBody
	if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Field != "url" || e.Error != "bad url" {
		t.Fatalf("body %s", w.Body)
	}
}
