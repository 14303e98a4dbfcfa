package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/laneway/laneway/internal/admin/wire"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/modes/feed"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

// Feeds are the pull endpoints' feeds (feed.Service).
type Feeds interface {
	// Create makes a new pull or batch endpoint's topic; Delete removes a
	// pull endpoint's.
	Create(ctx context.Context, e endpoint.Endpoint) error
	Delete(ctx context.Context, endpointID string) error
	// Read returns a page from offset from, waiting up to wait for one.
	Read(ctx context.Context, endpointID string, from int64, limit int, wait time.Duration) (feed.Page, error)
	// Ack stores the acknowledged position and returns the one stored.
	Ack(ctx context.Context, endpointID string, offset int64) (int64, error)
	// Position reports where the consumer stands.
	Position(ctx context.Context, endpointID string) (feed.Position, error)
	// BatchPosition reports how far a batch endpoint's feed was sent.
	BatchPosition(ctx context.Context, endpointID string) (feed.Position, error)
}

// feedRoutes are read with a pull endpoint's consumer token, never with
// the admin token: whoever runs the consumer can read that one feed and
// nothing else.
func (s *Server) feedRoutes(mux *http.ServeMux) {
	mux.Handle("GET /v1/feed/{id}", s.requireFeedToken(s.readFeed))
	mux.Handle("POST /v1/feed/{id}/ack", s.requireFeedToken(s.ackFeed))
}

// requireFeedToken answers 401 unless the bearer token is one of the
// endpoint's consumer tokens. An unknown endpoint gets the same answer as
// a wrong token, so that the route does not tell which endpoints exist;
// an address that failed too often gets 429 (FeedAuthLimit).
func (s *Server) requireFeedToken(next func(http.ResponseWriter, *http.Request, endpoint.Endpoint)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if s.feeds == nil {
			httpjson.Error(w, http.StatusNotImplemented, "feeds are not served by this instance")
			return
		}
		if s.feedGuard.refused(w, r) {
			return
		}
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		token = strings.TrimSpace(token)
		e, ok := s.endpoints.Get(r.PathValue("id"))
		if !strings.EqualFold(scheme, "Bearer") || !ok || !e.FeedTokenValid(token, s.now()) {
			// One answer for every failure, the admin token's included:
			// a hint for it would tell a guesser when a guess was right.
			s.feedGuard.failed(r)
			w.Header().Set("WWW-Authenticate", `Bearer realm="laneway-feed"`)
			httpjson.Error(w, http.StatusUnauthorized, "missing or invalid feed token (a feed is read with its consumer token, lwf_…)")
			return
		}
		next(w, r, e)
	})
}

// feedQuery is GET /v1/feed/{id}'s query.
type feedQuery struct {
	cursor string
	limit  int
	wait   time.Duration
}

func parseFeedQuery(r *http.Request) (feedQuery, error) {
	q := r.URL.Query()
	fq := feedQuery{cursor: q.Get("cursor"), limit: feed.DefaultLimit}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > feed.MaxLimit {
			return fq, &httpjson.FieldError{Field: "limit", Reason: "must be an integer from 1 to 1000"}
		}
		fq.limit = n
	}
	if v := q.Get("wait"); v != "" {
		d, err := parseWait(v)
		if err != nil || d < 0 || d > feed.MaxWait {
			return fq, &httpjson.FieldError{Field: "wait", Reason: `must be a duration from 0 to 30s ("25s") or seconds ("25")`}
		}
		fq.wait = d
	}
	return fq, nil
}

func parseWait(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(v)
}

// readFeed answers GET /v1/feed/{id}?cursor=&limit=&wait=. Without a
// cursor it reads from the acknowledged position, or from the oldest
// retained event.
func (s *Server) readFeed(w http.ResponseWriter, r *http.Request, e endpoint.Endpoint) {
	fq, err := parseFeedQuery(r)
	if err != nil {
		httpjson.Invalid(w, err)
		return
	}
	from, ok := s.feedStart(w, r, e.ID, fq.cursor)
	if !ok {
		return
	}
	page, err := s.feeds.Read(r.Context(), e.ID, from, fq.limit, fq.wait)
	if err != nil {
		s.feedError(w, r, e.ID, err)
		return
	}
	httpjson.WriteRaw(w, http.StatusOK, pageJSON(page))
}

// feedStart is the offset a read starts from.
func (s *Server) feedStart(w http.ResponseWriter, r *http.Request, id, cursor string) (int64, bool) {
	if cursor != "" {
		from, err := feed.ParseCursor(cursor)
		if err != nil {
			httpjson.Invalid(w, &httpjson.FieldError{Field: "cursor", Reason: "is not a cursor this feed gave out"})
			return 0, false
		}
		return from, true
	}
	pos, err := s.feeds.Position(r.Context(), id)
	if err != nil {
		s.feedError(w, r, id, err)
		return 0, false
	}
	return max(pos.Acked, pos.Start), true
}

// pageJSON renders {"events":[…],"next_cursor":"…"} around the events,
// which are JSON already.
func pageJSON(p feed.Page) []byte {
	n := 64
	for _, e := range p.Events {
		n += len(e) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"events":[`...)
	for i, e := range p.Events {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	b = append(b, `],"next_cursor":"`...)
	b = append(b, feed.Cursor(p.Next)...)
	return append(b, `"}`...)
}

// ackFeed answers POST /v1/feed/{id}/ack {"cursor": …}.
func (s *Server) ackFeed(w http.ResponseWriter, r *http.Request, e endpoint.Endpoint) {
	var req struct {
		Cursor string `json:"cursor"`
	}
	if !httpjson.ReadStrict(w, r, 4<<10, &req) {
		return
	}
	off, err := feed.ParseCursor(req.Cursor)
	if err != nil {
		httpjson.Invalid(w, &httpjson.FieldError{Field: "cursor", Reason: "is not a cursor this feed gave out"})
		return
	}
	acked, err := s.feeds.Ack(r.Context(), e.ID, off)
	if err != nil {
		s.feedError(w, r, e.ID, err)
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]string{"acked_cursor": feed.Cursor(acked)})
}

// feedError answers a feed failure: 410 with the oldest valid cursor, 400
// for a cursor past the end, 503 for Kafka being unavailable.
func (s *Server) feedError(w http.ResponseWriter, r *http.Request, id string, err error) {
	var expired *feed.ExpiredError
	var ahead *feed.AheadError
	switch {
	case errors.As(err, &expired):
		httpjson.Write(w, http.StatusGone, map[string]string{"error": err.Error(), "oldest_cursor": feed.Cursor(expired.Oldest)})
	case errors.As(err, &ahead):
		httpjson.Invalid(w, &httpjson.FieldError{Field: "cursor", Reason: err.Error()})
	case r.Context().Err() != nil:
		// The consumer left during a long poll: nobody reads the answer.
	default:
		s.logger.WarnContext(r.Context(), "api: feed unavailable", "endpoint_id", id, "error", err)
		httpjson.Error(w, http.StatusServiceUnavailable, "the feed is unavailable, retry")
	}
}

// withFeedPositions adds the positions of pull and batch endpoints. A pull
// consumer that acknowledges makes its feed's oldest unacknowledged event
// the endpoint's oldest pending delivery, as a push lane's would be; one
// that keeps its cursor itself leaves the figure to the lane alone. A
// batch endpoint's backlog is its feed after its cursor, always.
func (s *Server) withFeedPositions(ctx context.Context, eps []wire.Endpoint, now time.Time) {
	if s.feeds == nil {
		return
	}
	for i := range eps {
		var pos feed.Position
		var err error
		switch eps[i].Mode {
		case endpoint.ModePull:
			pos, err = s.feeds.Position(ctx, eps[i].ID)
		case endpoint.ModeBatch:
			pos, err = s.feeds.BatchPosition(ctx, eps[i].ID)
			pos.HasAcked = true // the cursor counts from the feed's start
		default:
			continue
		}
		if err != nil {
			s.logger.WarnContext(ctx, "api: feed position unavailable", "endpoint_id", eps[i].ID, "error", err)
			continue
		}
		eps[i].Feed = toFeedPosition(pos, now)
		if h := eps[i].Health; h != nil && pos.HasAcked {
			h.OldestPendingAgeSeconds = max(h.OldestPendingAgeSeconds, eps[i].Feed.OldestUnackedAgeSeconds)
		}
	}
}

func toFeedPosition(pos feed.Position, now time.Time) *wire.FeedPosition {
	out := &wire.FeedPosition{
		StartCursor: feed.Cursor(pos.Start), EndCursor: feed.Cursor(pos.End),
		Lag: pos.Lag(), OldestUnackedAgeSeconds: pos.OldestUnackedAge(now).Seconds(),
	}
	if pos.HasAcked {
		out.AckedCursor = feed.Cursor(max(pos.Acked, pos.Start))
	}
	return out
}
