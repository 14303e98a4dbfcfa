// Package inbound is Laneway's durable front door for webhooks that third
// parties (Stripe, GitHub, Slack, any Standard Webhooks sender) send to us.
//
// The request path does as little as possible: POST /in/{source} checks the
// client's and the source's rate limits, looks the source up, checks that its
// signature header is there, reads the body up to the source's limit, checks
// the signature (an HMAC over those bytes: a forged request is refused with
// 401 and kept as capped metadata, never stored whole) and writes the request
// exactly as received (raw body bytes as the record value, method, path,
// remote address, receive time and every HTTP header as record headers) to
// laneway.inbound with acks=all. Only then does it answer 202. It parses no
// JSON and runs no application code before the ACK, so a provider with a 3 s
// deadline is answered in milliseconds even when everything behind it is
// slow. ratelimit.go and refused.go bound what an anonymous sender can cost.
//
// Everything else happens in the verify stage, a consumer group on the
// inbound topic that, per poll, in one Kafka transaction together with the
// consumed offsets:
//
//   - verifies each captured request against its source's scheme (stripe,
//     github, slack, standard), over the raw bytes, with the source's current
//     and previous secret, and the timestamp checked against the time the
//     request was received;
//   - drops duplicates by the provider's delivery id (or a hash of source and
//     body) with a Redis claim that lives for the dedup window;
//   - normalises a verified request into an event.Envelope (tenant, type
//     mapping, entity and revision from the source config, the body bytes
//     verbatim as data) and publishes it to the events topic;
//   - appends an outcome record (verified, rejected with a reason, or
//     duplicate) to the captured request's own partition of the inbound
//     topic.
//
// A crash anywhere before the commit aborts the transaction and the requests
// are verified again from the last committed offset: nothing is lost and, on
// a real broker, nothing is forwarded twice. Redis holds no truth: losing it
// can let a duplicate through (with the same deterministic event id, so
// receivers drop it by webhook-id), never lose an event.
//
// The inbound topic alone answers "list requests by source, time and
// status": outcome records carry the request's summary, and a capture whose
// offset is at or above the verify group's committed offset is pending.
// Replays (re-verify, re-publish) copy selected captures to the end of the
// topic, marked as replays, so they take the same transactional path.
//
// Files: source.go (source model and validation), sourcestore.go (the
// compacted source config topic), record.go (capture and outcome records),
// verify.go (signature schemes and failure reasons), normalise.go (envelope
// mapping and dedup keys), dedup.go (Redis claims), capture.go (the HTTP
// front door), verifier.go (the verify stage), finder.go (listing),
// replay.go (background replay jobs), handlers.go (admin API), metrics.go,
// service.go (wiring, Config, Routes).
package inbound
