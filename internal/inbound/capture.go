package inbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/plumbing/addrlimit"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

// Reasons the door refuses a request that never reach an outcome record:
// they are only counted (laneway_inbound_refused_total), because storing
// them would cost what refusing them saves.
const (
	refusedRateAddress = "rate_limited_address"
	refusedRateSource  = "rate_limited_source"
	refusedUnreadable  = "unreadable_body" // the sender stopped or was cut (ReadTimeout)
	// refusedToken: a source with a capture token called without it or
	// with a wrong one; answered exactly as an unknown source.
	refusedToken = "bad_capture_token"
)

// capture handles POST /in/{source} and POST /in/{source}/{token}. In
// order:
//
//  1. the client address over its rate → 429 (counted, not stored);
//  2. unknown source, or a token that is not the source's (none given
//     when it has one, one given when it has none) → 404, the same
//     answer for both (counted, not stored);
//  3. the source over its rate → 429 (counted, not stored);
//  4. a signature header of the source's kind missing → 400 at once, the
//     body unread (kept as metadata: rejected, missing_signature);
//  5. body over the source's max_body_bytes → 413 (kept as metadata and
//     the first bytes: rejected, too_large);
//  6. the signature over the raw bytes does not match, or its timestamp is
//     stale → 401 (kept as metadata and the first bytes);
//  7. the request, body bytes as received, is produced to the inbound
//     topic with acks=all → 202 {"id": …} once acknowledged, 503 when Kafka
//     does not acknowledge within CaptureTimeout.
//
// Step 6 is an HMAC over bytes already in memory: no parsing, no I/O. It
// is what keeps an anonymous sender from storing 1 MiB bodies for the
// retention; the verify stage still decides every stored request.
func (s *Service) capture(w http.ResponseWriter, r *http.Request) {
	start := time.Now() // real clock: the ACK latency metric
	src, known := s.sources.Get(r.PathValue("source"))
	label := unknownSourceLabel
	if known {
		label = src.ID
	}
	code, refused := s.captureRequest(w, r, src, known)
	if refused == ReasonUnknownSource && known {
		refused = refusedToken
	}
	if refused != "" {
		s.metrics.refused.WithLabelValues(label, refused).Inc()
	}
	s.metrics.observeAck(label, code, time.Since(start))
}

// captureRequest answers the request and returns the status and, for a
// refusal, its reason.
func (s *Service) captureRequest(w http.ResponseWriter, r *http.Request, src Source, known bool) (int, string) {
	receivedAt := s.cfg.Now().UTC()
	if ok, wait := s.limits.allowAddress(addrlimit.ClientAddr(r, s.cfg.RateLimits.TrustedProxies)); !ok {
		return tooManyRequests(w, wait, "too many requests from this address"), refusedRateAddress
	}
	if !known || !src.acceptsToken(r.PathValue("token")) {
		return httpjson.Error(w, http.StatusNotFound, "unknown source"), ReasonUnknownSource
	}
	if !s.started.Load() {
		w.Header().Set("Retry-After", "1")
		return httpjson.Error(w, http.StatusServiceUnavailable, "not ready, retry"), ""
	}
	if ok, wait := s.limits.allowSource(src.ID); !ok {
		return tooManyRequests(w, wait, "too many requests for this source"), refusedRateSource
	}
	c := Capture{
		Source: src.ID, ReceivedAt: receivedAt, Method: r.Method, Path: src.storedPath(r),
		Host: r.Host, RemoteAddr: r.RemoteAddr, Header: r.Header,
	}
	if name := missingSignatureHeader(src.Kind, r.Header); name != "" {
		s.keepRefused(&c, ReasonMissingSignature, "no "+name+" header", nil)
		return httpjson.Error(w, http.StatusBadRequest, "missing "+name+" header"), ReasonMissingSignature
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, src.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.keepRefused(&c, ReasonTooLarge, fmt.Sprintf("body is larger than the source's limit of %d bytes", src.MaxBodyBytes), body)
		return httpjson.Error(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", src.MaxBodyBytes)), ReasonTooLarge
	case err != nil:
		return httpjson.Error(w, http.StatusBadRequest, "could not read the request body"), refusedUnreadable
	}
	if err := Verify(&src, r.Header, body, receivedAt); err != nil {
		reason, detail := Classify(err), err.Error()
		if reason == ReasonSecretsUnavailable {
			// Ours, not the sender's: 503 so that it retries once the key is back.
			return httpjson.Error(w, http.StatusServiceUnavailable, "this source's secrets cannot be decrypted with this instance's key file; retry later"), reason
		}
		var ve *VerifyError
		if errors.As(err, &ve) {
			detail = ve.Detail
		}
		s.keepRefused(&c, reason, detail, body)
		return httpjson.Error(w, http.StatusUnauthorized, "signature check failed: "+reason), reason
	}
	c.Body = body
	return s.store(w, r, &c)
}

// store produces an accepted request and answers once Kafka has it.
func (s *Service) store(w http.ResponseWriter, r *http.Request, c *Capture) (int, string) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CaptureTimeout)
	defer cancel()
	rec := c.record(s.cfg.Topics.Inbound, c.ReceivedAt)
	err := s.producer.ProduceSync(ctx, rec).FirstErr()
	switch {
	case errors.Is(err, kerr.MessageTooLarge):
		s.keepRefused(c, ReasonTooLarge, "the request is larger than the inbound topic's max.message.bytes", c.Body)
		return httpjson.Error(w, http.StatusRequestEntityTooLarge, "request is larger than the capture topic accepts"), ReasonTooLarge
	case err != nil:
		s.logger.Error("inbound capture failed; answering 503 so the sender retries", "source", c.Source, "err", err)
		w.Header().Set("Retry-After", "1")
		return httpjson.Error(w, http.StatusServiceUnavailable, "could not store the request, retry"), ""
	}
	return httpjson.Write(w, http.StatusAccepted, map[string]string{"id": RequestID(rec.Partition, rec.Offset)}), ""
}

func tooManyRequests(w http.ResponseWriter, wait time.Duration, msg string) int {
	w.Header().Set("Retry-After", strconv.Itoa(addrlimit.RetryAfterSeconds(wait)))
	return httpjson.Error(w, http.StatusTooManyRequests, msg)
}

// keepRefused stores a request the door refused, for forensics, as
// metadata: capped headers, path and host, and at most the first
// maxKeptBytes of the body. The verify stage records it as rejected with
// the door's reason. Refusals are kept within a budget (RefusedKeepRate);
// beyond it they are only counted, so what an anonymous sender can make
// Laneway store is bounded by configuration, not by how hard it sends.
//
// The write is not waited for (the sender gets its 4xx at once, and a
// flood of refused requests holds no handler on Kafka); TryProduce fails
// at once rather than block when the producer's buffer is full.
func (s *Service) keepRefused(c *Capture, reason, detail string, body []byte) {
	if !s.keepBudget.AllowN(s.cfg.Now(), 1) {
		s.metrics.refusedUnkept.Inc()
		return
	}
	k := refusedCapture(c, reason, detail, body)
	s.producer.TryProduce(context.Background(), k.record(s.cfg.Topics.Inbound, k.ReceivedAt), func(_ *kgo.Record, err error) {
		if err != nil {
			s.logger.Warn("could not keep a refused inbound request", "source", k.Source, "reason", reason, "err", err)
		}
	})
}
