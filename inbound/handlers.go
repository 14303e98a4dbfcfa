package inbound

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/laneway/laneway/internal/httpjson"
	"github.com/laneway/laneway/internal/logscan"
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

// listRequests answers GET /v1/inbound/requests?source=&status=&job=&since=&until=&cursor=&limit=.
func (s *Service) listRequests(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter := Filter{Source: q.Get("source"), Status: q.Get("status"), Job: q.Get("job")}
	switch filter.Status {
	case "", StatusPending, StatusVerified, StatusRejected, StatusDuplicate:
	default:
		httpjson.Invalid(w, &ValidationError{Field: "status", Reason: "must be pending, verified, rejected or duplicate"})
		return
	}
	var err error
	if filter.Since, err = parseTime(q.Get("since"), "since"); err == nil {
		filter.Until, err = parseTime(q.Get("until"), "until")
	}
	limit := logscan.DefaultLimit
	if err == nil && q.Get("limit") != "" {
		limit, err = strconv.Atoi(q.Get("limit"))
		if err != nil || limit < 1 || limit > logscan.MaxLimit {
			err = &ValidationError{Field: "limit", Reason: "must be between 1 and " + strconv.Itoa(logscan.MaxLimit)}
		}
	}
	if err != nil {
		httpjson.Invalid(w, err)
		return
	}
	page, err := s.finder.Find(r.Context(), filter, q.Get("cursor"), limit)
	switch {
	case errors.Is(err, logscan.ErrBadCursor):
		httpjson.Invalid(w, &ValidationError{Field: "cursor", Reason: "is not a cursor from this listing"})
	case err != nil:
		s.logger.ErrorContext(r.Context(), "inbound: listing failed", "err", err)
		httpjson.Error(w, http.StatusServiceUnavailable, "listing failed, retry: "+err.Error())
	default:
		httpjson.Write(w, http.StatusOK, page)
	}
}

func parseTime(v, field string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &ValidationError{Field: field, Reason: "must be an RFC 3339 time"}
	}
	return t, nil
}

// requestJSON is a captured request as received. body_base64 is exact;
// body is the same bytes as a string when they are valid UTF-8.
type requestJSON struct {
	ID         string      `json:"id"`
	Source     string      `json:"source"`
	ReceivedAt time.Time   `json:"received_at"`
	Method     string      `json:"method"`
	Path       string      `json:"path"`
	Host       string      `json:"host"`
	RemoteAddr string      `json:"remote_addr"`
	Headers    http.Header `json:"headers"`
	BodyBytes  int         `json:"body_bytes"`
	BodyBase64 string      `json:"body_base64"`
	Body       *string     `json:"body,omitempty"`
	Truncated  bool        `json:"truncated,omitempty"`
	Refused    string      `json:"refused,omitempty"`
	Detail     string      `json:"detail,omitempty"`
	ReplayOf   string      `json:"replay_of,omitempty"`
	Action     string      `json:"action,omitempty"`
	Job        string      `json:"job,omitempty"`
	// Status is the verify stage's decision (pending, verified, rejected,
	// duplicate) and Outcome its details, as in a listing; both are absent
	// when the outcome could not be found.
	Status  string `json:"status,omitempty"`
	Outcome *Item  `json:"outcome,omitempty"`
}

func (s *Service) getRequest(w http.ResponseWriter, r *http.Request) {
	c, ok := s.lookupCapture(w, r)
	if !ok {
		return
	}
	out := requestJSON{
		ID: c.ID, Source: c.Source, ReceivedAt: c.ReceivedAt, Method: c.Method, Path: c.Path, Host: c.Host,
		RemoteAddr: c.RemoteAddr, Headers: c.Header, BodyBytes: len(c.Body),
		BodyBase64: base64.StdEncoding.EncodeToString(c.Body), Truncated: c.Truncated,
		Refused: c.Reject, Detail: c.Detail, ReplayOf: c.ReplayOf, Action: c.Action, Job: c.Job,
	}
	if utf8.Valid(c.Body) {
		body := string(c.Body)
		out.Body = &body
	}
	it, found, err := s.finder.Outcome(r.Context(), &c)
	switch {
	case err != nil: // the request itself is known: answer without its status
		s.logger.WarnContext(r.Context(), "inbound: looking up a request's outcome", "id", c.ID, "err", err)
	case found:
		out.Status, out.Outcome = it.Status, &it
	}
	httpjson.Write(w, http.StatusOK, out)
}

// getRequestBody answers with the captured body bytes, exactly. It is
// served as an attachment of type application/octet-stream whatever the
// sender declared, so a browser never renders it.
func (s *Service) getRequestBody(w http.ResponseWriter, r *http.Request) {
	c, ok := s.lookupCapture(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", `attachment; filename="`+c.ID+`.body"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(c.Body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(c.Body)
}

func (s *Service) lookupCapture(w http.ResponseWriter, r *http.Request) (Capture, bool) {
	id := r.PathValue("id")
	if _, _, ok := ParseRequestID(id); !ok {
		httpjson.Error(w, http.StatusNotFound, "request not found")
		return Capture{}, false
	}
	c, ok, err := s.finder.Get(r.Context(), id)
	switch {
	case err != nil:
		httpjson.Error(w, http.StatusServiceUnavailable, "could not read the request, retry: "+err.Error())
		return Capture{}, false
	case !ok:
		httpjson.Error(w, http.StatusNotFound, "request not found")
		return Capture{}, false
	}
	return c, true
}

// submitReplay answers POST /v1/inbound/replays: 202 with the job when
// this call started (or resumed) it, 200 with its progress when the same
// request (same body, or same Idempotency-Key) already did.
func (s *Service) submitReplay(w http.ResponseWriter, r *http.Request) {
	var req ReplayRequest
	if !httpjson.ReadStrict(w, r, maxAdminBody, &req) {
		return
	}
	if req.Source != "" {
		if _, ok := s.sources.Get(req.Source); !ok {
			httpjson.Error(w, http.StatusNotFound, "source not found")
			return
		}
	}
	job, created, err := s.replays.Submit(r.Context(), req, r.Header.Get("Idempotency-Key"))
	var re *RequestError
	switch {
	case errors.As(err, &re):
		httpjson.Error(w, http.StatusBadRequest, re.Error())
		return
	case err != nil:
		s.logger.ErrorContext(r.Context(), "inbound: replay failed to start", "err", err)
		httpjson.Error(w, http.StatusServiceUnavailable, "could not start the replay, retry: "+err.Error())
		return
	}
	w.Header().Set("Location", "/v1/inbound/replays/"+job.ID)
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
	}
	job.Cursor = ""
	httpjson.Write(w, status, job)
}

func (s *Service) getReplay(w http.ResponseWriter, r *http.Request) {
	job, ok, err := s.replays.Get(r.Context(), r.PathValue("id"))
	switch {
	case err != nil:
		httpjson.Error(w, http.StatusServiceUnavailable, "could not read the replay, retry: "+err.Error())
	case !ok:
		httpjson.Error(w, http.StatusNotFound, "replay not found")
	default:
		job.Cursor = ""
		httpjson.Write(w, http.StatusOK, job)
	}
}

// decodeInto decodes body strictly into v, answering the request itself
// and returning false when it cannot.
func decodeInto(w http.ResponseWriter, body []byte, v any) bool {
	if err := httpjson.DecodeStrict(body, v); err != nil {
		httpjson.Invalid(w, err)
		return false
	}
	return true
}
