package receiver

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
)

// HandlerFunc is the application's part: it gets each verified delivery that
// is neither a duplicate nor stale. A nil error answers 200 and marks the
// webhook-id handled; an error answers 500 and Laneway retries the delivery.
// It runs while Laneway waits (5 s at most), so it should store or enqueue
// the delivery and return, and do slow work later.
type HandlerFunc func(ctx context.Context, d Delivery) error

// Handler is an http.Handler that receives Laneway deliveries: it verifies
// them, drops duplicates and stale revisions, and calls the application for
// the rest. The package documentation lists its answers. It is safe for
// concurrent use.
type Handler struct {
	cfg      Config
	verifier *Verifier
	app      HandlerFunc
}

// NewHandler builds a Handler that passes deliveries to app. It fails when
// cfg has no secret, a malformed secret or a negative setting, or app is nil.
func NewHandler(cfg Config, app HandlerFunc) (*Handler, error) {
	if app == nil {
		return nil, constError("receiver: NewHandler needs an application func")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	verifier, err := NewVerifier(cfg)
	if err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg.withDefaultStores(), verifier: verifier, app: app}, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	// MaxBytesReader also tells the server to close the connection rather
	// than read the rest of an oversized body.
	r.Body = http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes)
	d, err := h.verifier.ReadRequest(r)
	if err != nil {
		h.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "webhook rejected",
			slog.String("webhook_id", r.Header.Get(HeaderID)), slog.String("error", err.Error()))
		reply(w, statusOf(err), http.StatusText(statusOf(err)))
		return
	}
	res := h.process(r.Context(), r.Header.Get(HeaderID), d)
	reply(w, res.status(), res.String())
}

func reply(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(text + "\n"))
}

// result is what became of a verified delivery.
type result uint8

const (
	handled     result = iota // the application took it
	duplicate                 // its webhook-id was handled before
	stale                     // a newer revision of its entity was handled
	inProgress                // another attempt holds its webhook-id
	appFailed                 // the application returned an error
	storeFailed               // the dedup or revision store failed
)

func (r result) String() string {
	switch r {
	case handled:
		return "ok"
	case duplicate:
		return "duplicate"
	case stale:
		return "stale revision"
	case inProgress:
		return "in progress"
	case appFailed:
		return "handler failed"
	default:
		return "store unavailable"
	}
}

func (r result) status() int {
	switch r {
	case handled, duplicate, stale:
		return http.StatusOK
	case inProgress:
		return http.StatusConflict
	case appFailed:
		return http.StatusInternalServerError
	default:
		return http.StatusServiceUnavailable
	}
}

// process runs the checks and the application. msgID is the verified
// webhook-id.
func (h *Handler) process(ctx context.Context, msgID string, d Delivery) result {
	log := h.cfg.Logger.With(slog.String("webhook_id", msgID), slog.String("type", d.Type),
		slog.String("entity", d.Entity.ID), slog.Int64("revision", d.Entity.Revision))
	if versioned(d) {
		isStale, err := h.cfg.Revisions.Stale(ctx, d.Entity.ID, d.Entity.Revision)
		if err != nil {
			log.ErrorContext(ctx, "webhook revision check failed", slog.String("error", err.Error()))
			return storeFailed
		}
		if isStale {
			log.DebugContext(ctx, "webhook dropped: stale revision")
			return stale
		}
	}
	token := rand.Text()
	claim, err := h.cfg.Dedup.Claim(ctx, msgID, token, h.cfg.ClaimTTL)
	if err != nil {
		log.ErrorContext(ctx, "webhook dedup claim failed", slog.String("error", err.Error()))
		return storeFailed
	}
	switch claim {
	case AlreadyDone:
		log.DebugContext(ctx, "webhook dropped: duplicate")
		return duplicate
	case InProgress:
		log.DebugContext(ctx, "webhook deferred: same webhook-id in progress")
		return inProgress
	}
	return h.run(ctx, log, msgID, token, d)
}

// run calls the application under the claim held with token. The claim is
// released when the call fails or panics, so that Laneway's retry is handled
// rather than dropped as a duplicate.
func (h *Handler) run(ctx context.Context, log *slog.Logger, msgID, token string, d Delivery) result {
	// The bookkeeping must happen even when Laneway stopped waiting and
	// the request's context is done: the application has acted.
	bookCtx := context.WithoutCancel(ctx)
	succeeded := false
	defer func() {
		if !succeeded {
			if err := h.cfg.Dedup.Release(bookCtx, msgID, token); err != nil {
				log.ErrorContext(ctx, "webhook dedup release failed", slog.String("error", err.Error()))
			}
		}
	}()
	if err := h.app(ctx, d); err != nil {
		log.ErrorContext(ctx, "webhook handler failed", slog.String("error", err.Error()))
		return appFailed
	}
	succeeded = true
	h.remember(bookCtx, log, msgID, d)
	log.DebugContext(ctx, "webhook handled")
	return handled
}

// remember records a handled delivery. A store failure here is logged and
// still answers 200: the application has acted, and a 5xx would only make
// Laneway send the delivery again.
func (h *Handler) remember(ctx context.Context, log *slog.Logger, msgID string, d Delivery) {
	if versioned(d) {
		if err := h.cfg.Revisions.Advance(ctx, d.Entity.ID, d.Entity.Revision); err != nil {
			log.ErrorContext(ctx, "webhook revision advance failed", slog.String("error", err.Error()))
		}
	}
	if err := h.cfg.Dedup.Done(ctx, msgID, h.cfg.DedupTTL); err != nil {
		log.ErrorContext(ctx, "webhook dedup done failed", slog.String("error", err.Error()))
	}
}

// versioned reports whether d carries a revision to check: revision 0 is
// what Laneway sends when the producer gave none.
func versioned(d Delivery) bool { return d.Entity.Revision > 0 }
