package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/endpoint"
)

type secretsBody struct {
	Secrets []struct {
		Secret    string     `json:"secret"`
		ExpiresAt *time.Time `json:"expires_at"`
	} `json:"secrets"`
}

func decodeSecrets(t *testing.T, r response) secretsBody {
	t.Helper()
	var b secretsBody
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	return b
}

func TestRotateKeepsTheOldSecretForTheOverlap(t *testing.T) {
	h := newHarness(t, nil)
	e := createEndpoint(t, h)
	old := e.Secrets[0].Value

	r := h.do("POST", "/v1/endpoints/"+e.ID+"/secret/rotate", "")
	wantStatus(t, r, http.StatusOK)
	got := decodeSecrets(t, r)
	if len(got.Secrets) != 2 || got.Secrets[1].Secret != old || got.Secrets[0].Secret == old {
		t.Fatalf("after rotation: %+v; want a new secret first and the old one second", got)
	}
	if exp := got.Secrets[1].ExpiresAt; exp == nil || !exp.Equal(t0.Add(DefaultSecretOverlap)) {
		t.Fatalf("old secret expires at %v, want now + 24h", exp)
	}
	stored, _ := h.store.Get(e.ID)
	if signing := stored.SigningSecrets(t0.Add(time.Hour)); len(signing) != 2 {
		t.Fatalf("during the overlap deliveries are signed with %d secrets, want 2", len(signing))
	}
	if signing := stored.SigningSecrets(t0.Add(DefaultSecretOverlap)); len(signing) != 1 || signing[0] == old {
		t.Fatalf("after the overlap: signing secrets %v, want only the new one", signing)
	}

	// A second rotation with an explicit secret and no overlap retires the
	// others at once.
	h.clock.advance(time.Hour)
	next := endpoint.NewSecret()
	r = h.do("POST", "/v1/endpoints/"+e.ID+"/secret/rotate", `{"secret":"`+next+`","overlap_seconds":0}`)
	wantStatus(t, r, http.StatusOK)
	if got := decodeSecrets(t, r); len(got.Secrets) != 1 || got.Secrets[0].Secret != next {
		t.Fatalf("rotation without overlap: %+v", got)
	}
}

func TestRotateRefusesBadInput(t *testing.T) {
	h := newHarness(t, nil)
	e := createEndpoint(t, h)
	for _, body := range []string{`{"secret":"nope"}`, `{"overlap_seconds":-1}`, `{"overlap_seconds":99999999}`, `{"extra":1}`} {
		wantStatus(t, h.do("POST", "/v1/endpoints/"+e.ID+"/secret/rotate", body), http.StatusBadRequest)
	}
	wantStatus(t, h.do("POST", "/v1/endpoints/ep_missing/secret/rotate", ""), http.StatusNotFound)
	if stored, _ := h.store.Get(e.ID); len(stored.Secrets) != 1 {
		t.Fatalf("refused rotations changed the secrets: %+v", stored.Secrets)
	}
}

func TestSecretsOnlyThroughTheRevealRoute(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AdminToken = testToken })
	e := createEndpoint(t, h)
	secret := e.Secrets[0].Value
	for _, path := range []string{"/v1/endpoints/" + e.ID, "/v1/endpoints"} {
		if r := h.do("GET", path, ""); strings.Contains(string(r.body), secret) {
			t.Fatalf("GET %s shows the secret: %s", path, r.body)
		}
	}
	r := h.do("GET", "/v1/endpoints/"+e.ID+"/secret", "")
	wantStatus(t, r, http.StatusOK)
	if got := decodeSecrets(t, r); len(got.Secrets) != 1 || got.Secrets[0].Secret != secret {
		t.Fatalf("reveal: %s", r.body)
	}
	h.token = ""
	wantStatus(t, h.do("GET", "/v1/endpoints/"+e.ID+"/secret", ""), http.StatusUnauthorized)
	if strings.Contains(h.logs.String(), secret) {
		t.Fatal("a secret reached the logs")
	}
}
