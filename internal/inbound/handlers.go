package inbound

import (
	"errors"
	"net/http"
	"time"

	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

// maxAdminBody caps the JSON bodies of the admin routes.
const maxAdminBody = 256 << 10

// sourceJSON is a source as the API shows it: secrets only in the create,
// rotate and reveal responses.
type sourceJSON struct {
	ID                string            `json:"id"`
	Kind              string            `json:"kind"`
	Tenant            string            `json:"tenant"`
	CapturePath       string            `json:"capture_path"`
	ToleranceSeconds  int64             `json:"tolerance_seconds"`
	MaxBodyBytes      int64             `json:"max_body_bytes"`
	TypeField         string            `json:"type_field"`
	TypePrefix        string            `json:"type_prefix"`
	TypeMap           map[string]string `json:"type_map"`
	EntityField       string            `json:"entity_field"`
	RevisionField     string            `json:"revision_field"`
	Coalesce          bool              `json:"coalesce"`
	HasPreviousSecret bool              `json:"has_previous_secret"`
	HasCaptureToken   bool              `json:"has_capture_token"`
	CreatedAt         time.Time         `json:"created_at"`
	UpdatedAt         time.Time         `json:"updated_at"`
	Secret            string            `json:"secret,omitempty"`
	PreviousSecret    string            `json:"previous_secret,omitempty"`
	CaptureToken      string            `json:"capture_token,omitempty"`
}

func toSourceJSON(s Source, withSecrets bool) sourceJSON {
	out := sourceJSON{
		ID: s.ID, Kind: s.Kind, Tenant: s.Tenant, CapturePath: s.capturePath(withSecrets), HasCaptureToken: s.requiresToken(),
		ToleranceSeconds: s.ToleranceSeconds, MaxBodyBytes: s.MaxBodyBytes,
		TypeField: s.TypeField, TypePrefix: s.TypePrefix, TypeMap: s.TypeMap,
		EntityField: s.EntityField, RevisionField: s.RevisionField, Coalesce: s.Coalesce,
		HasPreviousSecret: s.PreviousSecret != "", CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
	if out.TypeMap == nil {
		out.TypeMap = map[string]string{}
	}
	if withSecrets {
		out.Secret, out.PreviousSecret, out.CaptureToken = s.Secret, s.PreviousSecret, s.CaptureToken
	}
	return out
}

// sourceRequest is the body of POST /v1/inbound/sources and PATCH
// /v1/inbound/sources/{id}. Pointers tell an absent field (default, or
// unchanged) from a given one.
type sourceRequest struct {
	ID               string             `json:"id"`
	Kind             string             `json:"kind"`
	Tenant           *string            `json:"tenant"`
	Secret           *string            `json:"secret"`
	PreviousSecret   *string            `json:"previous_secret"`
	ToleranceSeconds *int64             `json:"tolerance_seconds"`
	MaxBodyBytes     *int64             `json:"max_body_bytes"`
	TypeField        *string            `json:"type_field"`
	TypePrefix       *string            `json:"type_prefix"`
	TypeMap          *map[string]string `json:"type_map"`
	EntityField      *string            `json:"entity_field"`
	RevisionField    *string            `json:"revision_field"`
	Coalesce         *bool              `json:"coalesce"`
	// CaptureToken sets the token ("" removes it, and the previous one,
	// reopening /in/{id}); PreviousCaptureToken "" ends a rotation's overlap.
	CaptureToken         *string `json:"capture_token"`
	PreviousCaptureToken *string `json:"previous_capture_token"`
}

// apply sets every given field on s.
func (q *sourceRequest) apply(s *Source) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.Tenant, q.Tenant)
	set(&s.Secret, q.Secret)
	set(&s.PreviousSecret, q.PreviousSecret)
	set(&s.TypeField, q.TypeField)
	set(&s.TypePrefix, q.TypePrefix)
	set(&s.EntityField, q.EntityField)
	set(&s.RevisionField, q.RevisionField)
	set(&s.CaptureToken, q.CaptureToken)
	set(&s.PreviousCaptureToken, q.PreviousCaptureToken)
	if q.CaptureToken != nil && *q.CaptureToken == "" {
		s.PreviousCaptureToken = ""
	}
	if q.ToleranceSeconds != nil {
		s.ToleranceSeconds = *q.ToleranceSeconds
	}
	if q.MaxBodyBytes != nil {
		s.MaxBodyBytes = *q.MaxBodyBytes
	}
	if q.TypeMap != nil {
		s.TypeMap = *q.TypeMap
	}
	if q.Coalesce != nil {
		s.Coalesce = *q.Coalesce
	}
}

func (s *Service) createSource(w http.ResponseWriter, r *http.Request) {
	var req sourceRequest
	if !httpjson.ReadStrict(w, r, maxAdminBody, &req) {
		return
	}
	now := s.cfg.Now().UTC()
	src := Source{ID: req.ID, Kind: req.Kind, TypePrefix: DefaultTypePrefix(req.Kind), CreatedAt: now, UpdatedAt: now}
	req.apply(&src)
	if req.Secret == nil {
		if secret, ok := NewSecret(src.Kind); ok {
			src.Secret = secret
		}
	}
	src.SetDefaults()
	if err := src.Validate(); err != nil {
		httpjson.Invalid(w, err)
		return
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, exists := s.sources.Get(src.ID); exists {
		httpjson.Error(w, http.StatusConflict, "source "+src.ID+" already exists")
		return
	}
	if s.putSource(w, r, src) {
		w.Header().Set("Location", "/v1/inbound/sources/"+src.ID)
		httpjson.Write(w, http.StatusCreated, toSourceJSON(src, true))
	}
}

func (s *Service) putSource(w http.ResponseWriter, r *http.Request, src Source) bool {
	if err := s.sources.Put(r.Context(), src); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			httpjson.Invalid(w, err)
			return false
		}
		if errors.Is(err, ErrSecretsUnavailable) {
			httpjson.Error(w, http.StatusConflict, err.Error()+": put the key back in --secrets-key-file, or delete and recreate the source")
			return false
		}
		s.logger.ErrorContext(r.Context(), "inbound: storing a source failed", "source", src.ID, "err", err)
		httpjson.Error(w, http.StatusServiceUnavailable, "could not store the source, retry")
		return false
	}
	return true
}

func (s *Service) listSources(w http.ResponseWriter, _ *http.Request) {
	list := s.sources.List()
	out := make([]sourceJSON, 0, len(list))
	for _, src := range list {
		out = append(out, toSourceJSON(src, false))
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"data": out})
}

func (s *Service) getSource(w http.ResponseWriter, r *http.Request) {
	src, ok := s.sources.Get(r.PathValue("id"))
	if !ok {
		httpjson.Error(w, http.StatusNotFound, "source not found")
		return
	}
	httpjson.Write(w, http.StatusOK, toSourceJSON(src, false))
}

func (s *Service) patchSource(w http.ResponseWriter, r *http.Request) {
	var req sourceRequest
	if !httpjson.ReadStrict(w, r, maxAdminBody, &req) {
		return
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	src, ok := s.sources.Get(r.PathValue("id"))
	if !ok {
		httpjson.Error(w, http.StatusNotFound, "source not found")
		return
	}
	if (req.ID != "" && req.ID != src.ID) || (req.Kind != "" && req.Kind != src.Kind) {
		httpjson.Invalid(w, &ValidationError{Field: "id", Reason: "id and kind cannot change; create a new source"})
		return
	}
	req.apply(&src)
	src.UpdatedAt = s.cfg.Now().UTC()
	if err := src.Validate(); err != nil {
		httpjson.Invalid(w, err)
		return
	}
	if s.putSource(w, r, src) {
		httpjson.Write(w, http.StatusOK, toSourceJSON(src, false))
	}
}

func (s *Service) deleteSource(w http.ResponseWriter, r *http.Request) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	err := s.sources.Delete(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, ErrSourceNotFound):
		httpjson.Error(w, http.StatusNotFound, "source not found")
	case err != nil:
		httpjson.Error(w, http.StatusServiceUnavailable, "could not delete the source, retry")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

type secretsJSON struct {
	SourceID             string `json:"source_id"`
	Secret               string `json:"secret"`
	PreviousSecret       string `json:"previous_secret,omitempty"`
	CaptureToken         string `json:"capture_token,omitempty"`
	PreviousCaptureToken string `json:"previous_capture_token,omitempty"`
	CapturePath          string `json:"capture_path"`
}

// captureTokenJSON answers a capture token rotation: the signing secrets
// are not repeated.
type captureTokenJSON struct {
	SourceID             string `json:"source_id"`
	CaptureToken         string `json:"capture_token"`
	PreviousCaptureToken string `json:"previous_capture_token,omitempty"`
	CapturePath          string `json:"capture_path"`
}

func secretsJSONOf(src *Source) secretsJSON {
	return secretsJSON{
		SourceID: src.ID, Secret: src.Secret, PreviousSecret: src.PreviousSecret, CaptureToken: src.CaptureToken,
		PreviousCaptureToken: src.PreviousCaptureToken, CapturePath: src.capturePath(true),
	}
}

// rotateSecret makes {"secret": new} (generated for github and standard
// when absent) the current secret and the current one the previous, so
// requests signed with either verify while the provider switches. Setting
// previous_secret to "" with PATCH ends the overlap.
func (s *Service) rotateSecret(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Secret string `json:"secret"`
	}
	src, ok := s.rotate(w, r, &req, func(src *Source) error {
		if req.Secret == "" {
			secret, ok := NewSecret(src.Kind)
			if !ok {
				return &ValidationError{Field: "secret", Reason: "is required for " + src.Kind + " sources: copy the new one from the provider"}
			}
			req.Secret = secret
		}
		src.PreviousSecret, src.Secret = src.Secret, req.Secret
		return nil
	})
	if ok {
		httpjson.Write(w, http.StatusOK, secretsJSONOf(&src))
	}
}

// rotate is a rotation's read-modify-write: it decodes the optional JSON
// body into req and, under writeMu, applies change to the source and
// stores it. It returns the stored source, or false once it has answered
// the request itself (bad body, 404, invalid, store failure).
func (s *Service) rotate(w http.ResponseWriter, r *http.Request, req any, change func(*Source) error) (Source, bool) {
	body, ok := httpjson.ReadBody(w, r, maxAdminBody)
	if !ok || (len(body) > 0 && !decodeInto(w, body, req)) { // the body is optional, however it is framed
		return Source{}, false
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	src, ok := s.sources.Get(r.PathValue("id"))
	if !ok {
		httpjson.Error(w, http.StatusNotFound, "source not found")
		return Source{}, false
	}
	err := change(&src)
	if err == nil {
		src.UpdatedAt = s.cfg.Now().UTC()
		err = src.Validate()
	}
	if err != nil {
		httpjson.Invalid(w, err)
		return Source{}, false
	}
	return src, s.putSource(w, r, src)
}

func (s *Service) revealSecret(w http.ResponseWriter, r *http.Request) {
	src, ok := s.sources.Get(r.PathValue("id"))
	if !ok {
		httpjson.Error(w, http.StatusNotFound, "source not found")
		return
	}
	if src.heldErr != nil {
		httpjson.Error(w, http.StatusConflict, "the source's secrets cannot be decrypted with this instance's key file: "+src.heldErr.Error())
		return
	}
	s.logger.InfoContext(r.Context(), "inbound: source secret revealed", "source", src.ID)
	httpjson.Write(w, http.StatusOK, secretsJSONOf(&src))
}

// rotateCaptureToken makes {"capture_token": new} (generated when absent)
// the source's token and the current one the previous, so the old URL
// keeps working while the provider is switched; PATCH
// {"previous_capture_token": ""} closes it. On a source without a token
// it sets the first one, closing /in/{id} at once.
func (s *Service) rotateCaptureToken(w http.ResponseWriter, r *http.Request) {
	var req struct {
		CaptureToken string `json:"capture_token"`
	}
	src, ok := s.rotate(w, r, &req, func(src *Source) error {
		if req.CaptureToken == "" {
			req.CaptureToken = NewCaptureToken()
		}
		src.PreviousCaptureToken, src.CaptureToken = src.CaptureToken, req.CaptureToken
		return nil
	})
	if ok {
		s.logger.InfoContext(r.Context(), "inbound: source capture token rotated", "source", src.ID)
		httpjson.Write(w, http.StatusOK, captureTokenJSON{
			SourceID: src.ID, CaptureToken: src.CaptureToken, PreviousCaptureToken: src.PreviousCaptureToken, CapturePath: src.capturePath(true),
		})
	}
}
func decodeInto(w http.ResponseWriter, body []byte, v any) bool {
	if err := httpjson.DecodeStrict(body, v); err != nil {
		httpjson.Invalid(w, err)
		return false
	}
	return true
}
