package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/laneway/laneway/internal/admin/wire"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

// toFeedTokenJSON is a consumer token as the API lists it: never its
// value, which only the answer that creates it carries.
func toFeedTokenJSON(t endpoint.FeedToken) wire.FeedToken {
	out := wire.FeedToken{ID: t.ID, CreatedAt: t.CreatedAt}
	if !t.ExpiresAt.IsZero() {
		out.ExpiresAt = &t.ExpiresAt
	}
	return out
}

// pullEndpoint loads the path's endpoint for a token change, answering
// 404 or 409 itself. The caller holds writeMu.
func (s *Server) pullEndpoint(w http.ResponseWriter, r *http.Request) (endpoint.Endpoint, bool) {
	e, ok := s.pathEndpoint(w, r)
	if !ok {
		return e, false
	}
	if !e.Pull() {
		httpjson.Error(w, http.StatusConflict, "feed tokens belong to pull endpoints (mode \"pull\"); this one's mode is \""+toJSON(e).Mode+"\"")
		return e, false
	}
	// The tokens are changed in place below; the store's copy shares
	// this backing array.
	e.FeedTokens = slices.Clone(e.FeedTokens)
	return e, true
}

// createFeedToken answers POST /v1/endpoints/{id}/feed-tokens: a new
// consumer token, shown this once.
func (s *Server) createFeedToken(w http.ResponseWriter, r *http.Request) {
	s.edit(w, r, s.pullEndpoint, func(e endpoint.Endpoint) { s.addFeedToken(w, r, e, s.now().UTC()) })
}

// rotateFeedToken answers POST /v1/endpoints/{id}/feed-tokens/{token_id}/rotate
// {"overlap_seconds": n}: a new token, and the old one valid n seconds
// more (default 0: revoked now), as for signing secrets.
func (s *Server) rotateFeedToken(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OverlapSeconds int64 `json:"overlap_seconds"`
	}
	if !readOptional(w, r, 4<<10, &req) {
		return
	}
	overlap, err := overlapOf(&req.OverlapSeconds, 0)
	if err != nil {
		httpjson.Invalid(w, err)
		return
	}
	s.edit(w, r, s.pullEndpoint, func(e endpoint.Endpoint) {
		now := s.now().UTC()
		i := slices.IndexFunc(e.FeedTokens, func(t endpoint.FeedToken) bool { return t.ID == r.PathValue("token_id") })
		if i < 0 {
			httpjson.Error(w, http.StatusNotFound, "feed token not found")
			return
		}
		if overlap == 0 {
			e.FeedTokens = slices.Delete(e.FeedTokens, i, i+1)
		} else if old := &e.FeedTokens[i]; old.ExpiresAt.IsZero() || now.Add(overlap).Before(old.ExpiresAt) {
			old.ExpiresAt = now.Add(overlap)
		}
		s.addFeedToken(w, r, e, now)
	})
}

// addFeedToken saves e with a new token (its expired ones dropped) and
// answers 201 with it, shown this once.
func (s *Server) addFeedToken(w http.ResponseWriter, r *http.Request, e endpoint.Endpoint, now time.Time) {
	token, stored := endpoint.NewFeedToken("ft_"+s.newID(), now)
	e.FeedTokens = append(dropExpired(e.FeedTokens, now), stored)
	if err := e.Validate(); err != nil {
		httpjson.Write(w, http.StatusConflict, httpjson.ErrorBody{Error: err.Error(), Field: "feed_tokens"})
		return
	}
	e.UpdatedAt = s.now().UTC()
	if !s.put(w, r, e) {
		return
	}
	out := toFeedTokenJSON(stored)
	out.Token = token
	httpjson.Write(w, http.StatusCreated, out)
}

// listFeedTokens answers GET /v1/endpoints/{id}/feed-tokens.
func (s *Server) listFeedTokens(w http.ResponseWriter, r *http.Request) {
	e, ok := s.pullEndpoint(w, r)
	if !ok {
		return
	}
	out := []wire.FeedToken{}
	for _, t := range dropExpired(e.FeedTokens, s.now()) {
		out = append(out, toFeedTokenJSON(t))
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"data": out})
}

// revokeFeedToken answers DELETE /v1/endpoints/{id}/feed-tokens/{token_id}.
func (s *Server) revokeFeedToken(w http.ResponseWriter, r *http.Request) {
	s.edit(w, r, s.pullEndpoint, func(e endpoint.Endpoint) {
		n := len(e.FeedTokens)
		e.FeedTokens = slices.DeleteFunc(e.FeedTokens, func(t endpoint.FeedToken) bool { return t.ID == r.PathValue("token_id") })
		if len(e.FeedTokens) == n {
			httpjson.Error(w, http.StatusNotFound, "feed token not found")
			return
		}
		e.UpdatedAt = s.now().UTC()
		if s.put(w, r, e) {
			w.WriteHeader(http.StatusNoContent)
		}
	})
}

// dropExpired removes tokens whose overlap has ended.
func dropExpired(ts []endpoint.FeedToken, now time.Time) []endpoint.FeedToken {
	return slices.DeleteFunc(ts, func(t endpoint.FeedToken) bool { return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) })
}
