package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestIngestIsIdempotent publishes through the API twice with one
// Idempotency-Key: the second answer repeats the first and the topic holds
// one record. Against the real backend the key lives in the real Redis.
func TestIngestIsIdempotent(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		a := startApp(t, b, nil)
		body := []byte(`{"type":"order.updated","tenant":"acme","entity":"order:1","revision":1,"data":{}}`)
		first, firstCode := postEvent(t, a, body, "key-1")
		second, secondCode := postEvent(t, a, body, "key-1")
		if firstCode != http.StatusAccepted || secondCode != http.StatusAccepted || !bytes.Equal(first, second) {
			t.Fatalf("answers %d %s and %d %s, want the same 202 twice", firstCode, first, secondCode, second)
		}
		var res struct {
			ID     string `json:"id"`
			Offset int64  `json:"offset"`
		}
		if err := json.Unmarshal(first, &res); err != nil || res.ID == "" {
			t.Fatalf("response %s: %v", first, err)
		}
		if n := recordsIn(t, a.Brokers(), a.Topics().Events); n != 1 {
			t.Errorf("events topic holds %d records, want 1", n)
		}
		if _, code := postEvent(t, a, []byte(`{"type":"order.updated","tenant":"acme"}`), ""); code != http.StatusBadRequest {
			t.Errorf("event without entity: %d, want 400", code)
		}
	})
}

func postEvent(t *testing.T, a *app.App, body []byte, key string) ([]byte, int) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+a.HTTPAddr()+"/v1/events", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return out, resp.StatusCode
}
