package inbound

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/event"
)

func validSource() Source {
	s := Source{ID: "stripe-acme", Kind: KindStripe, Tenant: "acme", Secret: "whsec_x", TypePrefix: DefaultTypePrefix(KindStripe)}
	s.SetDefaults()
	return s
}

func TestSourceDefaults(t *testing.T) {
	s := validSource()
	if s.TypeField != "type" || s.EntityField != "data.object.id" || s.TypePrefix != "stripe." ||
		s.MaxBodyBytes != DefaultMaxBodyBytes || s.Tolerance() != DefaultTolerance {
		t.Fatalf("stripe defaults: %+v", s)
	}
	gh := Source{Kind: KindGitHub}
	gh.SetDefaults()
	if gh.TypeField != "header:X-GitHub-Event" || DefaultTypePrefix(KindGitHub) != "github." {
		t.Fatalf("github defaults: %+v", gh)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSourceValidation(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*Source)
	}{
		{"id", func(s *Source) { s.ID = "Has Caps" }},
		{"id", func(s *Source) { s.ID = "_leading" }},
		{"id", func(s *Source) { s.ID = strings.Repeat("a", 65) }},
		{"kind", func(s *Source) { s.Kind = "paypal" }},
		{"tenant", func(s *Source) { s.Tenant = " " }},
		{"secret", func(s *Source) { s.Secret = "" }},
		{"secret", func(s *Source) { s.Kind, s.Secret = KindStandard, "not-whsec" }},
		{"previous_secret", func(s *Source) { s.Kind, s.Secret, s.PreviousSecret = KindStandard, "whsec_AAAA", "bad" }},
		{"tolerance_seconds", func(s *Source) { s.ToleranceSeconds = -1 }},
		{"tolerance_seconds", func(s *Source) { s.ToleranceSeconds = 86401 }},
		{"max_body_bytes", func(s *Source) { s.MaxBodyBytes = MaxBodyLimit + 1 }},
		{"type_field", func(s *Source) { s.TypeField = "a..b" }},
		{"entity_field", func(s *Source) { s.EntityField = "header:" }},
		{"type_map", func(s *Source) { s.TypeMap = map[string]string{"x": ""} }},
	} {
		s := validSource()
		tc.edit(&s)
		err := s.Validate()
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("want a %s error, got %v", tc.field, err)
		}
	}
}

func TestNewSecretOnlyWhereWeChoose(t *testing.T) {
	if s, ok := NewSecret(KindStandard); !ok || validateSecret(KindStandard, "secret", s, true) != nil {
		t.Errorf("standard secret %q unusable", s)
	}
	if s, ok := NewSecret(KindGitHub); !ok || len(s) != 64 {
		t.Errorf("github secret %q", s)
	}
	for _, k := range []string{KindStripe, KindSlack} {
		if _, ok := NewSecret(k); ok {
			t.Errorf("%s secrets come from the provider", k)
		}
	}
}

func TestFieldPaths(t *testing.T) {
	doc := parsedBody([]byte(`{"a":{"b/c":{"d":[10,{"e":"x"}]},"n":1.50,"t":true,"o":{}},"s":""}`))
	h := http.Header{"X-Github-Event": {"push"}}
	for _, tc := range []struct {
		path, want string
		ok         bool
	}{
		{"/a/b~1c/d/1/e", "x", true},
		{"a.n", "1.50", true},
		{"a.t", "true", true},
		{"a.o", "", false},
		{"s", "", false},
		{"a.missing", "", false},
		{"/a/b~1c/d/0", "10", true},
		{"/a/b~1c/d/5", "", false},
		{"header:x-github-event", "push", true},
		{"header:X-Missing", "", false},
	} {
		f, err := parseFieldPath(tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		got, ok := f.lookup(h, doc)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %q %v, want %q %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func capture(src Source, header http.Header, body []byte) *Capture {
	return &Capture{ID: "in_0_1", Source: src.ID, ReceivedAt: recv, Header: header, Body: body}
}

func TestNormaliseKeepsTheBodyBytes(t *testing.T) {
	src := validSource()
	src.RevisionField = "data.object.amount"
	n, err := normalise(&src, capture(src, http.Header{}, oddBody))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(n.envelope, oddBody) {
		t.Fatalf("the envelope does not hold the body verbatim:\n%s", n.envelope)
	}
	env, err := event.ParseEnvelope(n.envelope, recv)
	if err != nil {
		t.Fatalf("the fan-out would refuse the envelope: %v", err)
	}
	if !bytes.Equal(bytes.TrimSpace(env.Data), bytes.TrimSpace(oddBody)) {
		t.Fatalf("data %q", env.Data)
	}
	want := event.Envelope{ID: n.eventID, Type: "stripe.invoice.paid", Tenant: "acme", Entity: "in_1", Revision: 100, OccurredAt: recv}
	env.Data = nil
	if !env.OccurredAt.Equal(want.OccurredAt) || env.ID != want.ID || env.Type != want.Type || env.Tenant != want.Tenant ||
		env.Entity != want.Entity || env.Revision != want.Revision {
		t.Fatalf("envelope %+v, want %+v", env, want)
	}
	if n.dedupKey != "evt_1" {
		t.Errorf("dedup key %q, want the Stripe event id", n.dedupKey)
	}
	// Same source and provider id: same event id; another source: another.
	again, _ := normalise(&src, capture(src, http.Header{}, tampered(oddBody)))
	other := src
	other.ID = "stripe-other"
	third, _ := normalise(&other, capture(other, http.Header{}, oddBody))
	if again.eventID != n.eventID || third.eventID == n.eventID {
		t.Errorf("event ids: %s %s %s", n.eventID, again.eventID, third.eventID)
	}
}

func TestNormaliseMappingAndFallbacks(t *testing.T) {
	gh := Source{ID: "gh", Kind: KindGitHub, Tenant: "acme", Secret: "x", TypePrefix: "github.",
		TypeMap: map[string]string{"ping": "github.hello"}}
	gh.SetDefaults()
	h := http.Header{"X-Github-Event": {"push"}, "X-Github-Delivery": {"d-1"}}
	n, err := normalise(&gh, capture(gh, h, []byte(`{"repository":{"full_name":"acme/app"}}`)))
	if err != nil || n.typ != "github.push" || n.entity != "acme/app" || !strings.HasPrefix(n.dedupKey, "sha256:") {
		t.Fatalf("github: %+v %v", n, err)
	}
	// X-GitHub-Delivery and X-GitHub-Event are not signed: a resend of the
	// same signed body under another delivery id and another event type
	// has the same dedup key and event id.
	resent := http.Header{"X-Github-Event": {"delete"}, "X-Github-Delivery": {"d-forged"}}
	again, err := normalise(&gh, capture(gh, resent, []byte(`{"repository":{"full_name":"acme/app"}}`)))
	if err != nil || again.dedupKey != n.dedupKey || again.eventID != n.eventID {
		t.Fatalf("resent with a new delivery id: key %q id %s, want %q %s", again.dedupKey, again.eventID, n.dedupKey, n.eventID)
	}
	h.Set("X-Github-Event", "ping")
	n, _ = normalise(&gh, capture(gh, h, []byte(`{}`)))
	if n.typ != "github.hello" || n.entity != n.eventID {
		t.Errorf("mapped type %q, entity %q (want the event id as fallback)", n.typ, n.entity)
	}
	// No type: unmapped, with the dedup key still known for the listing.
	h.Del("X-Github-Event")
	_, err = normalise(&gh, capture(gh, h, []byte(`{}`)))
	if Classify(err) != ReasonUnmapped {
		t.Errorf("no type: %v", err)
	}
	// A non-JSON body goes in as a JSON string; without a provider id the
	// dedup key is a hash of source and body.
	h.Set("X-Github-Event", "form")
	h.Del("X-Github-Delivery")
	n, err = normalise(&gh, capture(gh, h, []byte("payload=%7B%7D")))
	if err != nil || !bytes.Contains(n.envelope, []byte(`"data":"payload=%7B%7D"`)) || !strings.HasPrefix(n.dedupKey, "sha256:") {
		t.Fatalf("form body: %s %v %q", n.envelope, err, n.dedupKey)
	}
	// A body too large for the events topic is rejected as too_large.
	big := []byte(`{"type":"x","pad":"` + strings.Repeat("a", event.MaxEnvelopeBytes) + `"}`)
	src := validSource()
	if _, err := normalise(&src, capture(src, nil, big)); Classify(err) != ReasonTooLarge {
		t.Errorf("huge body: %v", err)
	}
}

// A provider's event type or entity holding control characters is refused
// as unmapped here, at the inbound door, rather than forwarded to be
// dead-lettered by the fan-out (#27).
func TestNormaliseRefusesControlCharacters(t *testing.T) {
	gh := Source{ID: "gh", Kind: KindGitHub, Tenant: "acme", Secret: "x"}
	gh.SetDefaults()
	for name, tc := range map[string]struct {
		event string
		body  string
	}{
		"type":   {"push\r\nX-Injected: 1", `{"repository":{"full_name":"acme/app"}}`},
		"entity": {"push", `{"repository":{"full_name":"acme/app\r\nX-Injected: 1"}}`},
	} {
		h := http.Header{"X-Github-Event": {tc.event}}
		_, err := normalise(&gh, capture(gh, h, []byte(tc.body)))
		if Classify(err) != ReasonUnmapped || !strings.Contains(err.Error(), "control character") {
			t.Errorf("%s with CR/LF: %v, want unmapped naming the control character", name, err)
		}
	}
}

func TestRequestIDsRoundTrip(t *testing.T) {
	p, o, ok := ParseRequestID(RequestID(7, 123456789))
	if !ok || p != 7 || o != 123456789 {
		t.Fatal(p, o, ok)
	}
	for _, bad := range []string{"", "in_", "in_1", "in_x_1", "in_1_-2", "ev_1_2"} {
		if _, _, ok := ParseRequestID(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestCaptureRecordRoundTrip(t *testing.T) {
	c := Capture{
		Source: "gh", ReceivedAt: recv, Method: "POST", Path: "/in/gh?x=1", Host: "h", RemoteAddr: "1.2.3.4:5",
		Header: http.Header{"X-A": {"1", "2"}, "Content-Type": {"application/json"}}, Body: oddBody,
	}
	r := c.record("t", recv.Add(time.Second))
	r.Partition, r.Offset = 3, 9
	got, err := decodeCapture(r)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "in_3_9" || !bytes.Equal(got.Body, oddBody) || !got.ReceivedAt.Equal(recv) || got.Path != c.Path ||
		got.Header.Get("Content-Type") != "application/json" || len(got.Header["X-A"]) != 2 {
		t.Fatalf("round trip: %+v", got)
	}
	raw, _ := json.Marshal(got.Header)
	if !strings.Contains(string(raw), `"X-A":["1","2"]`) {
		t.Errorf("headers %s", raw)
	}
}
