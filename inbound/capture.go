package inbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// capture handles POST /in/{source}. In order:
//
//  1. unknown source → 404 (nothing stored);
//  2. a signature header of the source's kind missing → 400 at once, the
//     body unread (the request's metadata is kept as rejected,
//     missing_signature);
//  3. body over the source's max_body_bytes → 413 (metadata and the first
//     4 KiB are kept as rejected, too_large);
//  4. the request, body bytes as received, is produced to the inbound
//     topic with acks=all → 202 {"id": …} once acknowledged, 503 when Kafka
//     does not acknowledge within CaptureTimeout.
//
// Nothing here parses the body or calls application code.
func (s *Service) capture(w http.ResponseWriter, r *http.Request) {
	start := time.Now() // real clock: the ACK latency metric
	code := s.captureRequest(w, r)
	label := r.PathValue("source")
	if code == http.StatusNotFound {
		label = unknownSourceLabel
	}
	s.metrics.observeAck(label, code, time.Since(start))
}

func (s *Service) captureRequest(w http.ResponseWriter, r *http.Request) int {
	receivedAt := s.cfg.Now().UTC()
	id := r.PathValue("source")
	src, ok := s.sources.Get(id)
	if !ok {
		return writeError(w, http.StatusNotFound, "unknown source")
	}
	if !s.started.Load() {
		w.Header().Set("Retry-After", "1")
		return writeError(w, http.StatusServiceUnavailable, "not ready, retry")
	}
	c := Capture{
		Source: id, ReceivedAt: receivedAt, Method: r.Method, Path: r.RequestURI,
		Host: r.Host, RemoteAddr: r.RemoteAddr, Header: r.Header,
	}
	if c.Path == "" {
		c.Path = r.URL.RequestURI()
	}
	if name := missingSignatureHeader(src.Kind, r.Header); name != "" {
		c.Reject, c.Detail = ReasonMissingSignature, "no "+name+" header"
		s.keepRefused(&c)
		return writeError(w, http.StatusBadRequest, "missing "+name+" header")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, src.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.refuseTooLarge(&c, body, fmt.Sprintf("body is larger than the source's limit of %d bytes", src.MaxBodyBytes))
		return writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", src.MaxBodyBytes))
	case err != nil:
		return writeError(w, http.StatusBadRequest, "could not read the request body")
	}
	c.Body = body
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CaptureTimeout)
	defer cancel()
	rec := c.record(s.cfg.Topics.Inbound, receivedAt)
	err = s.producer.ProduceSync(ctx, rec).FirstErr()
	switch {
	case errors.Is(err, kerr.MessageTooLarge):
		s.refuseTooLarge(&c, body, "the request is larger than the inbound topic's max.message.bytes")
		return writeError(w, http.StatusRequestEntityTooLarge, "request is larger than the capture topic accepts")
	case err != nil:
		s.logger.Error("inbound capture failed; answering 503 so the sender retries", "source", id, "err", err)
		w.Header().Set("Retry-After", "1")
		return writeError(w, http.StatusServiceUnavailable, "could not store the request, retry")
	}
	return writeJSON(w, http.StatusAccepted, map[string]string{"id": RequestID(rec.Partition, rec.Offset)})
}

func (s *Service) refuseTooLarge(c *Capture, body []byte, detail string) {
	c.Reject, c.Detail = ReasonTooLarge, detail
	c.Body, c.Truncated = body[:min(len(body), maxKeptBytes)], true
	s.keepRefused(c)
}

// keepRefused stores a request the door refused, for forensics: the verify
// stage records it as rejected with the door's reason. The write is not
// waited for (the sender gets its 4xx at once, and a flood of refused
// requests holds no handler on Kafka); TryProduce fails at once rather than
// block when the producer's buffer is full. A failure is logged.
func (s *Service) keepRefused(c *Capture) {
	s.producer.TryProduce(context.Background(), c.record(s.cfg.Topics.Inbound, c.ReceivedAt), func(_ *kgo.Record, err error) {
		if err != nil {
			s.logger.Warn("could not keep a refused inbound request", "source", c.Source, "reason", c.Reject, "err", err)
		}
	})
}
