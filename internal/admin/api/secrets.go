package api

import (
	"net/http"
	"time"

	"github.com/laneway/laneway/internal/admin/wire"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

// MaxSecretOverlap bounds how long a rotated-out secret may stay valid.
const MaxSecretOverlap = 30 * 24 * time.Hour

// rotateRequest is the optional body of POST /v1/endpoints/{id}/secret/rotate.
type rotateRequest struct {
	// Secret is the new secret; empty generates one.
	Secret string `json:"secret"`
	// OverlapSeconds is how long the current secrets stay valid; absent
	// takes the server's default (24 h), 0 retires them at once.
	OverlapSeconds *int64 `json:"overlap_seconds"`
}

func toSecretsJSON(e endpoint.Endpoint, now time.Time) wire.SecretList {
	out := wire.SecretList{EndpointID: e.ID, Secrets: []wire.Secret{}}
	for _, sec := range e.Secrets {
		if !sec.ExpiresAt.IsZero() && !now.Before(sec.ExpiresAt) {
			continue
		}
		js := wire.Secret{Secret: sec.Value}
		if !sec.ExpiresAt.IsZero() {
			at := sec.ExpiresAt
			js.ExpiresAt = &at
		}
		out.Secrets = append(out.Secrets, js)
	}
	return out
}

// rotateSecret puts a new secret first and keeps the current ones valid for
// the overlap, during which deliveries carry a signature for each, so
// receivers can switch at their own pace. It answers with the valid
// secrets, newest first: the one response besides creation and the reveal
// route that shows them.
func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request) {
	var req rotateRequest
	if !readOptional(w, r, s.maxBody, &req) {
		return
	}
	overlap, err := overlapOf(req.OverlapSeconds, s.secretOverlap)
	if err == nil && req.Secret == "" {
		req.Secret = endpoint.NewSecret()
	} else if err == nil {
		err = endpoint.ValidateSecret(req.Secret)
	}
	if err != nil {
		httpjson.Invalid(w, err)
		return
	}
	s.edit(w, r, s.pathEndpoint, func(e endpoint.Endpoint) {
		now := s.now().UTC()
		e.Secrets = rotated(e.Secrets, req.Secret, now, overlap)
		e.UpdatedAt = now
		if s.put(w, r, e) {
			httpjson.Write(w, http.StatusOK, toSecretsJSON(e, now))
		}
	})
}

// overlapOf is a rotation's overlap_seconds (nil: def), which must be
// between 0 and MaxSecretOverlap.
func overlapOf(seconds *int64, def time.Duration) (time.Duration, error) {
	if seconds == nil {
		return def, nil
	}
	overlap := time.Duration(*seconds) * time.Second
	if *seconds < 0 || overlap > MaxSecretOverlap {
		return 0, &httpjson.FieldError{Field: "overlap_seconds", Reason: "must be between 0 and 30 days"}
	}
	return overlap, nil
}

// rotated returns the new secret followed by the still-valid old ones, each
// expiring at the end of the overlap at the latest.
func rotated(old []endpoint.Secret, secret string, now time.Time, overlap time.Duration) []endpoint.Secret {
	out := []endpoint.Secret{{Value: secret}}
	until := now.Add(overlap)
	for _, sec := range old {
		if sec.Value == secret || (!sec.ExpiresAt.IsZero() && !now.Before(sec.ExpiresAt)) {
			continue
		}
		if overlap == 0 {
			continue
		}
		if sec.ExpiresAt.IsZero() || sec.ExpiresAt.After(until) {
			sec.ExpiresAt = until
		}
		out = append(out, sec)
	}
	return out
}

// revealSecret answers GET /v1/endpoints/{id}/secret: the explicit route for
// reading secrets after creation (GET /v1/endpoints never shows them).
func (s *Server) revealSecret(w http.ResponseWriter, r *http.Request) {
	e, ok := s.pathEndpoint(w, r)
	if !ok {
		return
	}
	s.logger.InfoContext(r.Context(), "api: endpoint secret revealed", "endpoint_id", e.ID)
	httpjson.Write(w, http.StatusOK, toSecretsJSON(e, s.now()))
}
