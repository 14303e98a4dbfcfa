package inbound

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record headers on the inbound topic. The record value of a capture is the
// raw body, untouched; everything else about the request is a header, so the
// body bytes are exactly what the sender signed.
const (
	hdrKind      = "li-kind" // kindCapture or kindOutcome
	hdrReceived  = "li-received"
	hdrMethod    = "li-method"
	hdrPath      = "li-path"
	hdrRemote    = "li-remote"
	hdrHost      = "li-host"
	hdrReject    = "li-reject"    // a reason the door refused the request with
	hdrDetail    = "li-detail"    // what the door saw
	hdrTruncated = "li-truncated" // "1": the value holds only a prefix of the body
	hdrReplayOf  = "li-replay-of" // id of the original capture of a replay
	hdrAction    = "li-action"    // ActionReverify or ActionRepublish
	hdrJob       = "li-job"       // the replay job that wrote the copy
	httpPrefix   = "h:"           // + canonical HTTP header name, one record header per value
	kindCapture  = "capture"
	kindOutcome  = "outcome"
	idPrefix     = "in_"
)

// Request statuses.
const (
	StatusPending   = "pending"   // captured, not verified yet
	StatusVerified  = "verified"  // signature good, event forwarded
	StatusRejected  = "rejected"  // kept for forensics with a reason
	StatusDuplicate = "duplicate" // signature good, an earlier request forwarded it
)

// Capture is a request as the front door received it.
type Capture struct {
	// ID is "in_<partition>_<offset>", the capture's place on the inbound topic.
	ID         string
	Source     string
	ReceivedAt time.Time
	Method     string
	Path       string
	Host       string
	RemoteAddr string
	Header     http.Header
	Body       []byte
	// Reject is set when the door refused the request (too_large,
	// missing_signature); Detail says what it saw; Truncated means Body
	// holds only the first bytes.
	Reject    string
	Detail    string
	Truncated bool
	// ReplayOf, Action and Job mark a copy written by a replay job.
	ReplayOf string
	Action   string
	Job      string

	Partition int32
	Offset    int64
	Timestamp time.Time // the record's timestamp: receipt, or replay time
}

// RequestID names the record at (partition, offset) of the inbound topic.
func RequestID(partition int32, offset int64) string {
	return idPrefix + strconv.Itoa(int(partition)) + "_" + strconv.FormatInt(offset, 10)
}

// ParseRequestID is the inverse of RequestID.
func ParseRequestID(id string) (partition int32, offset int64, ok bool) {
	rest, found := strings.CutPrefix(id, idPrefix)
	if !found {
		return 0, 0, false
	}
	ps, os, found := strings.Cut(rest, "_")
	if !found {
		return 0, 0, false
	}
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if err1 != nil || err2 != nil || p < 0 || o < 0 {
		return 0, 0, false
	}
	return int32(p), o, true
}

// record encodes the capture for the inbound topic: key = source id (so a
// source's requests stay in one partition, in arrival order), value = body.
func (c *Capture) record(topic string, ts time.Time) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, 8+len(c.Header))
	add := func(k, v string) {
		if v != "" {
			hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
	}
	add(hdrKind, kindCapture)
	add(hdrReceived, c.ReceivedAt.UTC().Format(time.RFC3339Nano))
	for _, h := range c.textHeaders() {
		add(h.key, *h.field)
	}
	if c.Truncated {
		add(hdrTruncated, "1")
	}
	for name, values := range c.Header {
		for _, v := range values {
			hs = append(hs, kgo.RecordHeader{Key: httpPrefix + name, Value: []byte(v)})
		}
	}
	body := c.Body
	if body == nil {
		body = []byte{} // an empty body is a value, not a tombstone
	}
	return &kgo.Record{Topic: topic, Key: []byte(c.Source), Value: body, Headers: hs, Timestamp: ts}
}

// textHeader is a capture field that travels as a plain text record header.
type textHeader struct {
	key   string
	field *string
}

// textHeaders are c's text fields with their headers, so that record (which
// writes those not empty) and decodeCapture read one list.
func (c *Capture) textHeaders() []textHeader {
	return []textHeader{
		{hdrMethod, &c.Method}, {hdrPath, &c.Path}, {hdrHost, &c.Host}, {hdrRemote, &c.RemoteAddr},
		{hdrReject, &c.Reject}, {hdrDetail, &c.Detail},
		{hdrReplayOf, &c.ReplayOf}, {hdrAction, &c.Action}, {hdrJob, &c.Job},
	}
}

// textField is the field of the text header key, or nil.
func textField(text []textHeader, key string) *string {
	for _, h := range text {
		if h.key == key {
			return h.field
		}
	}
	return nil
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// recordKind returns kindCapture, kindOutcome or "" for a foreign record.
func recordKind(r *kgo.Record) string { return header(r, hdrKind) }

var errNotCapture = errors.New("not a captured request")

// decodeCapture reads a capture record back.
func decodeCapture(r *kgo.Record) (Capture, error) {
	if recordKind(r) != kindCapture {
		return Capture{}, errNotCapture
	}
	c := Capture{
		ID: RequestID(r.Partition, r.Offset), Source: string(r.Key), Body: r.Value,
		Header: http.Header{}, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
	}
	text := c.textHeaders()
	for _, h := range r.Headers {
		v := string(h.Value)
		switch h.Key {
		case hdrReceived:
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return c, fmt.Errorf("capture %s: bad %s header: %w", c.ID, hdrReceived, err)
			}
			c.ReceivedAt = t
		case hdrTruncated:
			c.Truncated = v == "1"
		default:
			if field := textField(text, h.Key); field != nil {
				*field = v
			} else if name, ok := strings.CutPrefix(h.Key, httpPrefix); ok {
				c.Header[name] = append(c.Header[name], v)
			}
		}
	}
	if c.ReceivedAt.IsZero() {
		return c, fmt.Errorf("capture %s: no %s header", c.ID, hdrReceived)
	}
	return c, nil
}

// Item is one inbound request in a listing: the summary an outcome record
// carries, or a pending capture. It is also the value of an outcome record.
type Item struct {
	// ID is the capture this is about ("in_<partition>_<offset>").
	ID     string `json:"id"`
	Source string `json:"source"`
	// Status is pending, verified, rejected or duplicate; Reason (one of the
	// Reason* constants) and Detail say why a request was rejected.
	Status     string    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	// VerifiedAt is when the verify stage decided (zero while pending).
	VerifiedAt time.Time `json:"verified_at,omitzero"`
	Method     string    `json:"method"`
	Path       string    `json:"path"`
	RemoteAddr string    `json:"remote_addr"`
	BodyBytes  int       `json:"body_bytes"`
	// DedupKey is the provider's delivery id, or sha256:… of source+body.
	DedupKey string `json:"dedup_key,omitempty"`
	// DuplicateOf is the request that forwarded the event first.
	DuplicateOf string `json:"duplicate_of,omitempty"`
	// EventID, EventType and Entity describe the forwarded envelope.
	EventID   string `json:"event_id,omitempty"`
	EventType string `json:"event_type,omitempty"`
	Entity    string `json:"entity,omitempty"`
	// ReplayOf, Action and Job are set on the outcome of a replayed copy.
	ReplayOf string `json:"replay_of,omitempty"`
	Action   string `json:"action,omitempty"`
	Job      string `json:"job,omitempty"`
}

// itemOf summarises a capture (status pending until an outcome says more).
func itemOf(c *Capture) Item {
	return Item{
		ID: c.ID, Source: c.Source, Status: StatusPending, ReceivedAt: c.ReceivedAt,
		Method: c.Method, Path: c.Path, RemoteAddr: c.RemoteAddr, BodyBytes: len(c.Body),
		ReplayOf: c.ReplayOf, Action: c.Action, Job: c.Job,
	}
}

// outcomeRecord is the outcome record of item, in the partition of the
// capture it answers (the verifier's partitioner honours Partition for the
// inbound topic), stamped now.
func outcomeRecord(topic string, partition int32, it *Item, now time.Time) *kgo.Record {
	value, _ := json.Marshal(it) // plain struct always encodes
	return &kgo.Record{
		Topic: topic, Partition: partition, Key: []byte(it.Source), Value: value, Timestamp: now,
		Headers: []kgo.RecordHeader{{Key: hdrKind, Value: []byte(kindOutcome)}},
	}
}

func decodeOutcome(r *kgo.Record) (Item, bool) {
	if recordKind(r) != kindOutcome {
		return Item{}, false
	}
	var it Item
	if err := json.Unmarshal(r.Value, &it); err != nil || it.ID == "" {
		return Item{}, false
	}
	return it, true
}
