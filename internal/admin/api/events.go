package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

const (
	// pendingValue marks an idempotency key whose request is publishing.
	pendingValue = "pending"
	// pendingTTL bounds how long a request that died mid-publish blocks its
	// key: after it, a retry publishes again (a possible duplicate, never a
	// loss).
	pendingTTL = 60 * time.Second
	// publishTimeout is shorter than pendingTTL so that the pending marker
	// outlives the publish: a concurrent retry gets 409, not a second publish,
	// and the release after a failure cannot delete someone else's claim.
	publishTimeout = 50 * time.Second
	// maxRawKeyLen is the longest client key used verbatim in a Redis key;
	// longer ones are hashed so that a client cannot make huge keys.
	maxRawKeyLen = 200
	// replayedHeader marks a response served from a stored result.
	replayedHeader = "Idempotent-Replayed"
)

// ingestResult is the 202 body of POST /v1/events and, byte for byte, what is
// stored under the idempotency key to answer replays.
type ingestResult struct {
	ID        string `json:"id"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// storedIngest is what is kept under an idempotency key once its request
// succeeded: the response, and the fingerprint of the request it answers.
type storedIngest struct {
	Result      ingestResult `json:"result"`
	Fingerprint string       `json:"request_sha256"`
}

// ingestEvent accepts one event envelope and publishes it.
//
// Idempotency: the key is the Idempotency-Key header or, failing that, an
// event id the client supplied, scoped by tenant. A repeat of a request that
// succeeded gets the first response again, with Idempotent-Replayed: true. A
// key reused for a different event gets 422: answering it with the first
// event's 202 would drop the second silently. A repeat while the first is
// still publishing gets 409. Without Redis, or when it fails, events are
// published without deduplication, since Redis holds no truth.
func (s *Server) ingestEvent(w http.ResponseWriter, r *http.Request) {
	body, ok := httpjson.ReadBody(w, r, s.maxBody)
	if !ok {
		return
	}
	env, err := event.ParseEnvelope(body, s.now())
	if err != nil {
		writeInvalidEvent(w, err)
		return
	}
	key := s.idempotencyKey(r, body, env)
	if key == "" {
		s.publishAndRecord(w, r, env, "", "")
		return
	}
	fp := fingerprint(body)
	state, stored, err := s.claim(r.Context(), key, fp)
	switch state {
	case claimOwned:
		s.publishAndRecord(w, r, env, key, fp)
	case claimPending:
		httpjson.Error(w, http.StatusConflict, "a request with this idempotency key is in progress")
	case claimConflict:
		httpjson.Write(w, http.StatusUnprocessableEntity, httpjson.ErrorBody{Reason: "idempotency_key_reused",
			Error: "this idempotency key (the Idempotency-Key header, or else the event id) was used " +
				"for a different event; send a different event under a new key"})
	case claimReplay:
		w.Header().Set(replayedHeader, "true")
		httpjson.WriteRaw(w, http.StatusAccepted, stored)
	default:
		s.logger.WarnContext(r.Context(), "api: idempotency store failed, publishing without deduplication",
			"tenant", env.Tenant, "event_id", env.ID, "error", err)
		s.publishAndRecord(w, r, env, "", "")
	}
}

func writeInvalidEvent(w http.ResponseWriter, err error) {
	body := httpjson.ErrorBody{Error: err.Error()}
	var ie *event.InvalidError
	if errors.As(err, &ie) {
		body.Reason, body.Field = ie.Reason, ie.Field
	}
	httpjson.Write(w, http.StatusBadRequest, body)
}

// idempotencyKey returns the Redis key deduplicating this request, or ""
// when there is nothing to deduplicate on.
func (s *Server) idempotencyKey(r *http.Request, body []byte, env event.Envelope) string {
	if s.redis == nil {
		return ""
	}
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if key == "" && clientSetID(body) {
		key = env.ID
	}
	if key == "" {
		return ""
	}
	return redisKey(env.Tenant, key)
}

// clientSetID reports whether the body carried an event id. An id that
// ParseEnvelope generated is new on every request, so it cannot deduplicate.
func clientSetID(body []byte) bool {
	var probe struct {
		ID string `json:"id"`
	}
	return json.Unmarshal(body, &probe) == nil && probe.ID != ""
}

// redisKey builds laneway:idem:<tenant>:<key>. '%' and ':' are escaped in
// the tenant so that the first ':' after it ends it: tenant "a:b" with key
// "c" and tenant "a" with key "b:c" must not share a key, or one tenant's
// event would be answered with the other's result and never published.
func redisKey(tenant, key string) string {
	if len(key) > maxRawKeyLen {
		sum := sha256.Sum256([]byte(key))
		key = hex.EncodeToString(sum[:])
	}
	tenant = strings.ReplaceAll(strings.ReplaceAll(tenant, "%", "%25"), ":", "%3A")
	return "laneway:idem:" + tenant + ":" + key
}

// claimState is what the idempotency store says about a key.
type claimState int

const (
	claimUnavailable claimState = iota // Redis failed: publish without deduplication
	claimOwned                         // this request publishes, then stores its result
	claimPending                       // another request with this key is publishing
	claimReplay                        // a stored result answers this request
	claimConflict                      // the key was used for a different request
)

// claim marks key as pending unless it exists, and otherwise reads it. fp is
// the request's fingerprint, kept in the marker and the stored result so
// that a different request under the same key is told apart.
func (s *Server) claim(ctx context.Context, key, fp string) (claimState, []byte, error) {
	// Two rounds, because the key can expire between SET NX and GET.
	for range 2 {
		ok, err := s.redis.SetNX(ctx, key, pendingValue+":"+fp, pendingTTL).Result()
		if err != nil {
			return claimUnavailable, nil, err
		}
		if ok {
			return claimOwned, nil, nil
		}
		stored, err := s.redis.Get(ctx, key).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case err != nil:
			return claimUnavailable, nil, err
		}
		return classify(stored, fp)
	}
	return claimUnavailable, nil, errors.New("idempotency key kept expiring")
}

// classify reads what an idempotency key holds. Markers and results written
// before fingerprints existed (bare "pending", a bare ingestResult) carry
// none and are trusted as the same request.
func classify(stored []byte, fp string) (claimState, []byte, error) {
	if marker, ok := strings.CutPrefix(string(stored), pendingValue); ok {
		if other, ok := strings.CutPrefix(marker, ":"); ok && other != fp {
			return claimConflict, nil, nil
		}
		return claimPending, nil, nil
	}
	var rec storedIngest
	if json.Unmarshal(stored, &rec) == nil && rec.Result.ID != "" {
		if rec.Fingerprint != fp {
			return claimConflict, nil, nil
		}
		body, err := json.Marshal(rec.Result)
		return claimReplay, body, err
	}
	var old ingestResult
	if json.Unmarshal(stored, &old) == nil && old.ID != "" {
		return claimReplay, stored, nil
	}
	return claimUnavailable, nil, fmt.Errorf("idempotency key holds an unexpected value of %d bytes", len(stored))
}

// fingerprint identifies a request body by its JSON value, so that a retry
// re-encoded by the client (key order, spacing) is still the same request.
// The body was accepted by event.ParseEnvelope, so it decodes.
func fingerprint(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // exact numbers: 1e400 and 1e401 must differ
	var v any
	canonical := body
	if dec.Decode(&v) == nil {
		if b, err := json.Marshal(v); err == nil { // map keys come out sorted
			canonical = b
		}
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// publishAndRecord publishes env and answers 202, storing the answer and the
// request's fingerprint fp under key (when not "") for replays, or releases
// key when publishing failed so that the client's retry is not refused.
func (s *Server) publishAndRecord(w http.ResponseWriter, r *http.Request, env event.Envelope, key, fp string) {
	res, err := s.publish(r.Context(), env)
	// The client may have gone; the key must still be settled.
	ctx := context.WithoutCancel(r.Context())
	if err != nil {
		if key != "" {
			s.redisDo(ctx, "release", env, s.redis.Del(ctx, key).Err())
		}
		s.logger.ErrorContext(ctx, "api: publishing event failed", "tenant", env.Tenant, "event_id", env.ID, "error", err)
		httpjson.Error(w, http.StatusServiceUnavailable, "event was not accepted, retry: "+err.Error())
		return
	}
	body, err := json.Marshal(res)
	if err != nil { // cannot happen for ingestResult; answered rather than ignored
		httpjson.Error(w, http.StatusInternalServerError, "could not encode the response")
		return
	}
	if key != "" {
		s.record(ctx, env, key, storedIngest{Result: res, Fingerprint: fp})
	}
	httpjson.WriteRaw(w, http.StatusAccepted, body)
}

// record stores a succeeded request's result under its key.
func (s *Server) record(ctx context.Context, env event.Envelope, key string, rec storedIngest) {
	value, err := json.Marshal(rec)
	if err == nil {
		err = s.redis.Set(ctx, key, value, s.ttl).Err()
	}
	s.redisDo(ctx, "record", env, err)
}

func (s *Server) publish(ctx context.Context, env event.Envelope) (ingestResult, error) {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	partition, offset, err := s.publisher.Publish(ctx, env)
	return ingestResult{ID: env.ID, Partition: partition, Offset: offset}, err
}

// redisDo logs a failed idempotency write. It is not an error for the
// client: the event's fate is decided by the publish alone.
func (s *Server) redisDo(ctx context.Context, op string, env event.Envelope, err error) {
	if err != nil {
		s.logger.WarnContext(ctx, "api: idempotency store write failed", "op", op,
			"tenant", env.Tenant, "event_id", env.ID, "error", err)
	}
}
