package receiver_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/receiver"
	"github.com/laneway/laneway/signing"
)

func newVerifier(t *testing.T, c *clock, secrets ...string) *receiver.Verifier {
	t.Helper()
	v, err := receiver.NewVerifier(receiver.Config{Secrets: secrets, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerifyAcceptsOfficialLibrarySignatures(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	v := newVerifier(t, c, secret)
	bodies := [][]byte{
		payload(t, "evt_1", "order:1", 17),
		[]byte(`{"id":"x","type":"t","entity":{"id":"e","revision":0},"data":null}`),
		[]byte("not even JSON: signatures cover any bytes"),
	}
	for _, body := range bodies {
		h := signedHeaders(t, "msg_1", c.Now(), body, secret)
		if err := v.Verify(h, body); err != nil {
			t.Errorf("Verify(%.40q): %v", body, err)
		}
	}
}

// The vector published with the Standard Webhooks reference libraries, with
// the clock set to its timestamp.
func TestVerifyKnownVector(t *testing.T) {
	c := &clock{t: time.Unix(1614265330, 0)}
	v := newVerifier(t, c, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	if err := v.Verify(h, []byte(`{"test": 2432232314}`)); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyRejects(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	body := payload(t, "evt_1", "order:1", 17)
	good := func() http.Header { return signedHeaders(t, "evt_1", c.Now(), body, secret) }
	without := func(name string) http.Header { h := good(); h.Del(name); return h }

	tests := []struct {
		name   string
		h      http.Header
		body   []byte
		reason string
	}{
		{"tampered body", good(), bytes.Replace(body, []byte("paid"), []byte("void"), 1), receiver.ReasonSignatureMismatch},
		{"body with trailing newline", good(), append(bytes.Clone(body), '\n'), receiver.ReasonSignatureMismatch},
		{"wrong secret", signedHeaders(t, "evt_1", c.Now(), body, testSecret(2)), body, receiver.ReasonSignatureMismatch},
		{"other webhook-id", func() http.Header { h := good(); h.Set("webhook-id", "evt_2"); return h }(), body, receiver.ReasonSignatureMismatch},
		{"6 minutes old", signedHeaders(t, "evt_1", c.Now().Add(-6*time.Minute), body, secret), body, receiver.ReasonTimestampTooOld},
		{"6 minutes ahead", signedHeaders(t, "evt_1", c.Now().Add(6*time.Minute), body, secret), body, receiver.ReasonTimestampTooNew},
		{"no webhook-id", without("webhook-id"), body, receiver.ReasonMissingHeader},
		{"no webhook-timestamp", without("webhook-timestamp"), body, receiver.ReasonMissingHeader},
		{"no webhook-signature", without("webhook-signature"), body, receiver.ReasonMissingHeader},
		{"timestamp not a number", func() http.Header { h := good(); h.Set("webhook-timestamp", "soon"); return h }(), body, receiver.ReasonMalformedHeader},
		{"only a v2 signature", func() http.Header {
			h := good()
			h.Set("webhook-signature", "v2,"+strings.TrimPrefix(h.Get("webhook-signature"), "v1,"))
			return h
		}(), body, receiver.ReasonSignatureMismatch},
	}
	v := newVerifier(t, c, secret)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Verify(tt.h, tt.body)
			var ve *receiver.VerificationError
			if !errors.As(err, &ve) {
				t.Fatalf("Verify = %v, want a *VerificationError", err)
			}
			if ve.Reason != tt.reason {
				t.Fatalf("Reason = %q, want %q (%v)", ve.Reason, tt.reason, err)
			}
			if strings.Contains(err.Error(), strings.TrimPrefix(secret, "whsec_")) {
				t.Fatalf("error quotes the secret: %v", err)
			}
		})
	}
}

func TestVerifyTimestampErrorUnwraps(t *testing.T) {
	c := newClock()
	body := []byte(`{}`)
	v := newVerifier(t, c, testSecret(1))
	err := v.Verify(signedHeaders(t, "m", c.Now().Add(-time.Hour), body, testSecret(1)), body)
	var te *signing.TimestampError
	if !errors.As(err, &te) || te.Tolerance != receiver.DefaultTolerance {
		t.Fatalf("Verify = %v, want a *signing.TimestampError with the default tolerance inside", err)
	}
}

func TestVerifyToleranceBoundaries(t *testing.T) {
	body := []byte(`{}`)
	tests := []struct {
		tolerance time.Duration
		skew      time.Duration // timestamp minus now
		ok        bool
	}{
		{0, -5 * time.Minute, true}, // zero means the default, five minutes
		{0, 5 * time.Minute, true},
		{0, -5*time.Minute - time.Second, false},
		{0, 5*time.Minute + time.Second, false},
		{0, -4 * time.Minute, true},
		{time.Minute, -2 * time.Minute, false},
		{time.Minute, -59 * time.Second, true},
		{time.Hour, 59 * time.Minute, true},
	}
	for _, tt := range tests {
		c := newClock()
		v, err := receiver.NewVerifier(receiver.Config{Secrets: []string{testSecret(1)}, Tolerance: tt.tolerance, Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		err = v.Verify(signedHeaders(t, "m", c.Now().Add(tt.skew), body, testSecret(1)), body)
		if (err == nil) != tt.ok {
			t.Errorf("tolerance %v, skew %v: Verify = %v, want ok=%v", tt.tolerance, tt.skew, err, tt.ok)
		}
	}
}

func TestVerifyRotation(t *testing.T) {
	c := newClock()
	oldSecret, newSecret := testSecret(1), testSecret(2)
	body := payload(t, "evt_1", "order:1", 1)
	tests := []struct {
		name     string
		accepts  []string // the receiver's secrets
		signedBy []string // the signatures in the header
		ok       bool
	}{
		{"receiver has both, sender signs with old", []string{oldSecret, newSecret}, []string{oldSecret}, true},
		{"receiver has both, sender signs with new", []string{oldSecret, newSecret}, []string{newSecret}, true},
		{"receiver has new, sender in overlap", []string{newSecret}, []string{oldSecret, newSecret}, true},
		{"receiver has old, sender in overlap", []string{oldSecret}, []string{oldSecret, newSecret}, true},
		{"receiver has old, sender finished rotating", []string{oldSecret}, []string{newSecret}, false},
		{"receiver has new, sender not started", []string{newSecret}, []string{oldSecret}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerifier(t, c, tt.accepts...)
			err := v.Verify(signedHeaders(t, "evt_1", c.Now(), body, tt.signedBy...), body)
			if (err == nil) != tt.ok {
				t.Fatalf("Verify = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestNewVerifierRefusesBadConfig(t *testing.T) {
	const leak = "whsec_not*base64"
	tests := []struct {
		name string
		cfg  receiver.Config
	}{
		{"no secrets", receiver.Config{}},
		{"secret without prefix", receiver.Config{Secrets: []string{"c2VjcmV0"}}},
		{"secret not base64", receiver.Config{Secrets: []string{testSecret(1), leak}}},
		{"negative tolerance", receiver.Config{Secrets: []string{testSecret(1)}, Tolerance: -time.Second}},
		{"negative body cap", receiver.Config{Secrets: []string{testSecret(1)}, MaxBodyBytes: -1}},
	}
	for _, tt := range tests {
		_, err := receiver.NewVerifier(tt.cfg)
		if err == nil {
			t.Errorf("%s: NewVerifier succeeded", tt.name)
			continue
		}
		if strings.Contains(err.Error(), "not*base64") {
			t.Errorf("%s: error quotes the secret: %v", tt.name, err)
		}
	}
}

func TestParseLanewayPayload(t *testing.T) {
	body := payload(t, "evt_9", "order:123", 17)
	d, err := receiver.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "evt_9" || d.Type != "order.updated" || d.Entity.ID != "order:123" || d.Entity.Revision != 17 {
		t.Fatalf("Parse = %+v", d)
	}
	if !d.Timestamp.Equal(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("Timestamp = %v", d.Timestamp)
	}
	var data struct{ Status, Note string }
	if err := json.Unmarshal(d.Data, &data); err != nil || data.Status != "paid" || data.Note != "café ✓" {
		t.Fatalf("Data = %s (%v)", d.Data, err)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		body string
		ok   bool
	}{
		{"minimal", `{"id":"e","type":"t","entity":{"id":"x"}}`, true},
		{"unknown fields ignored", `{"id":"e","type":"t","entity":{"id":"x","revision":2,"tenant":"y"},"new":1}`, true},
		{"null data", `{"id":"e","type":"t","data":null,"entity":{"id":"x"}}`, true},
		{"empty", ``, false},
		{"null", `null`, false},
		{"array", `[]`, false},
		{"trailing data", `{"id":"e","type":"t","entity":{"id":"x"}} {}`, false},
		{"no id", `{"type":"t","entity":{"id":"x"}}`, false},
		{"no type", `{"id":"e","entity":{"id":"x"}}`, false},
		{"no entity", `{"id":"e","type":"t"}`, false},
		{"negative revision", `{"id":"e","type":"t","entity":{"id":"x","revision":-1}}`, false},
		{"revision not a number", `{"id":"e","type":"t","entity":{"id":"x","revision":"7"}}`, false},
		{"bad timestamp", `{"id":"e","type":"t","timestamp":"yesterday","entity":{"id":"x"}}`, false},
	}
	for _, tt := range tests {
		_, err := receiver.Parse([]byte(tt.body))
		if (err == nil) != tt.ok {
			t.Errorf("%s: Parse = %v, want ok=%v", tt.name, err, tt.ok)
		}
		var pe *receiver.PayloadError
		if err != nil && !errors.As(err, &pe) {
			t.Errorf("%s: error %v is not a *PayloadError", tt.name, err)
		}
	}
}

func TestReadRequestBodyCap(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	const limit = 64
	v, err := receiver.NewVerifier(receiver.Config{Secrets: []string{secret}, Now: c.Now, MaxBodyBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	atLimit := []byte(`{"id":"e","type":"t","entity":{"id":"x"}}`)
	atLimit = append(atLimit, bytes.Repeat([]byte(" "), limit-len(atLimit))...)
	over := append(bytes.Clone(atLimit), ' ')

	if _, err := v.ReadRequest(request(signedHeaders(t, "e", c.Now(), atLimit, secret), atLimit)); err != nil {
		t.Fatalf("a body of exactly MaxBodyBytes: %v", err)
	}
	for _, chunked := range []bool{false, true} {
		r := request(signedHeaders(t, "e", c.Now(), over, secret), over)
		if chunked { // no Content-Length: the cap must hold while reading
			r.ContentLength = -1
			r.Body = io.NopCloser(bytes.NewReader(over))
		}
		_, err := v.ReadRequest(r)
		var tl *receiver.TooLargeError
		if !errors.As(err, &tl) || tl.Limit != limit {
			t.Fatalf("chunked=%v: ReadRequest = %v, want a *TooLargeError", chunked, err)
		}
	}
}

func TestReadRequestVerifiesBeforeParsing(t *testing.T) {
	c := newClock()
	v := newVerifier(t, c, testSecret(1))
	body := []byte(`not json`)
	_, err := v.ReadRequest(request(signedHeaders(t, "e", c.Now(), body, testSecret(2)), body))
	var ve *receiver.VerificationError
	if !errors.As(err, &ve) {
		t.Fatalf("ReadRequest = %v, want a *VerificationError: an unsigned body must not be parsed", err)
	}
	_, err = v.ReadRequest(request(signedHeaders(t, "e", c.Now(), body, testSecret(1)), body))
	var pe *receiver.PayloadError
	if !errors.As(err, &pe) {
		t.Fatalf("ReadRequest = %v, want a *PayloadError", err)
	}
}
