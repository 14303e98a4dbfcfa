package inbound

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v74/github"
	"github.com/slack-go/slack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/laneway/laneway/signing"
)

// recv is when the front door received the request in these tests.
var recv = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// oddBody has whitespace, key order and escapes a re-encoding would
// change: signatures must be checked over exactly these bytes.
var oddBody = []byte("{\n  \"type\" : \"invoice.paid\",\"id\":\"evt_1\",  \"data\": {\"object\": {\"id\": \"in_1\", \"note\": \"<b>&amp;\\u00e9</b>\", \"amount\":  100 }}\t}\n")

// tampered returns body with one whitespace byte removed: the same JSON
// value, different bytes.
func tampered(body []byte) []byte {
	i := bytes.IndexByte(body, ' ')
	return append(append([]byte{}, body[:i]...), body[i+1:]...)
}

func wantReason(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if got := Classify(err); got != reason {
		t.Errorf("%s: got %q (%v), want %q", what, got, err, reason)
	}
	var ve *VerifyError
	if reason != "" && !errors.As(err, &ve) {
		t.Errorf("%s: error %T is not a *VerifyError", what, err)
	}
}

func TestStripeSignaturesFromStripeGo(t *testing.T) {
	src := &Source{ID: "stripe", Kind: KindStripe, Secret: "whsec_current", PreviousSecret: "whsec_previous", ToleranceSeconds: 300}
	sign := func(secret string, at time.Time) http.Header {
		p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: oddBody, Secret: secret, Timestamp: at})
		return http.Header{"Stripe-Signature": {p.Header}}
	}
	h := sign("whsec_current", recv.Add(-30*time.Second))
	// The official library accepts what it produced (a sanity check of the fixture).
	if err := webhook.ValidatePayloadIgnoringTolerance(oddBody, h.Get("Stripe-Signature"), "whsec_current"); err != nil {
		t.Fatalf("stripe-go rejects its own test payload: %v", err)
	}
	wantReason(t, "current secret", Verify(src, h, oddBody, recv), "")
	wantReason(t, "previous secret", Verify(src, sign("whsec_previous", recv), oddBody, recv), "")
	wantReason(t, "tampered bytes", Verify(src, h, tampered(oddBody), recv), ReasonBadSignature)
	wantReason(t, "wrong secret", Verify(src, sign("whsec_other", recv), oddBody, recv), ReasonBadSignature)
	wantReason(t, "stale timestamp", Verify(src, sign("whsec_current", recv.Add(-6*time.Minute)), oddBody, recv), ReasonStaleTimestamp)
	wantReason(t, "future timestamp", Verify(src, sign("whsec_current", recv.Add(6*time.Minute)), oddBody, recv), ReasonStaleTimestamp)
	wantReason(t, "stale and wrong secret", Verify(src, sign("whsec_other", recv.Add(-time.Hour)), oddBody, recv), ReasonBadSignature)
	wantReason(t, "no header", Verify(src, http.Header{}, oddBody, recv), ReasonMissingSignature)
	wantReason(t, "garbage header", Verify(src, http.Header{"Stripe-Signature": {"garbage"}}, oddBody, recv), ReasonBadSignature)
	// A late verification judges the timestamp by the receipt, not by now.
	wantReason(t, "verified a day later", Verify(src, h, oddBody, recv), "")
	// v0 (test-mode legacy) signatures are not accepted: only v1.
	p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: oddBody, Secret: "whsec_current", Timestamp: recv, Scheme: "v0"})
	wantReason(t, "v0 scheme", Verify(src, http.Header{"Stripe-Signature": {p.Header}}, oddBody, recv), ReasonBadSignature)
}

// githubSignature signs the way GitHub documents it: "sha256=" + hex
// HMAC-SHA256 of the raw body, keyed by the webhook secret.
func githubSignature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func TestGitHubSignaturesCrossCheckedWithGoGitHub(t *testing.T) {
	src := &Source{ID: "gh", Kind: KindGitHub, Secret: "s3cret", PreviousSecret: "old", ToleranceSeconds: 300}
	sig := githubSignature("s3cret", oddBody)
	// go-github's ValidateSignature and ValidatePayload accept the signature.
	if err := github.ValidateSignature(sig, oddBody, []byte("s3cret")); err != nil {
		t.Fatalf("go-github rejects the documented signature: %v", err)
	}
	req := httptest.NewRequest(http.MethodPost, "/in/gh", bytes.NewReader(oddBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(github.SHA256SignatureHeader, sig)
	payload, err := github.ValidatePayload(req, []byte("s3cret"))
	if err != nil || !bytes.Equal(payload, oddBody) {
		t.Fatalf("go-github ValidatePayload: %v", err)
	}
	if github.ValidateSignature(sig, tampered(oddBody), []byte("s3cret")) == nil {
		t.Fatal("go-github accepts tampered bytes: the fixture is wrong")
	}

	h := http.Header{"X-Hub-Signature-256": {sig}}
	wantReason(t, "current secret", Verify(src, h, oddBody, recv), "")
	wantReason(t, "previous secret", Verify(src, http.Header{"X-Hub-Signature-256": {githubSignature("old", oddBody)}}, oddBody, recv), "")
	wantReason(t, "tampered bytes", Verify(src, h, tampered(oddBody), recv), ReasonBadSignature)
	wantReason(t, "wrong secret", Verify(src, http.Header{"X-Hub-Signature-256": {githubSignature("nope", oddBody)}}, oddBody, recv), ReasonBadSignature)
	wantReason(t, "sha1 only", Verify(src, http.Header{"X-Hub-Signature": {"sha1=00"}}, oddBody, recv), ReasonMissingSignature)
	wantReason(t, "no prefix", Verify(src, http.Header{"X-Hub-Signature-256": {sig[len("sha256="):]}}, oddBody, recv), ReasonBadSignature)
}

// slackSignature signs the way Slack documents it: "v0=" + hex
// HMAC-SHA256 of "v0:<timestamp>:<body>".
func slackSignature(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

func slackHeaders(secret string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	return http.Header{"X-Slack-Signature": {slackSignature(secret, ts, body)}, "X-Slack-Request-Timestamp": {ts}}
}

func TestSlackSignaturesCrossCheckedWithSlackGo(t *testing.T) {
	secret := "8f742231b10e8888abcd99yyyzzz85a5"
	src := &Source{ID: "slack", Kind: KindSlack, Secret: secret, PreviousSecret: "previous-secret", ToleranceSeconds: 300}
	// slack-go's verifier checks the timestamp against the wall clock, so
	// the cross-check signs at the real now.
	now := time.Now()
	h := slackHeaders(secret, now, oddBody)
	sv, err := slack.NewSecretsVerifier(h, secret)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = sv.Write(oddBody)
	if err := sv.Ensure(); err != nil {
		t.Fatalf("slack-go rejects the documented signature: %v", err)
	}
	sv, _ = slack.NewSecretsVerifier(h, secret)
	_, _ = sv.Write(tampered(oddBody))
	if sv.Ensure() == nil {
		t.Fatal("slack-go accepts tampered bytes: the fixture is wrong")
	}
	wantReason(t, "slack-go's accepted request", Verify(src, h, oddBody, now), "")

	h = slackHeaders(secret, recv.Add(-time.Minute), oddBody)
	wantReason(t, "current secret", Verify(src, h, oddBody, recv), "")
	wantReason(t, "previous secret", Verify(src, slackHeaders("previous-secret", recv, oddBody), oddBody, recv), "")
	wantReason(t, "tampered bytes", Verify(src, h, tampered(oddBody), recv), ReasonBadSignature)
	wantReason(t, "wrong secret", Verify(src, slackHeaders("wrong", recv, oddBody), oddBody, recv), ReasonBadSignature)
	wantReason(t, "stale timestamp", Verify(src, slackHeaders(secret, recv.Add(-10*time.Minute), oddBody), oddBody, recv), ReasonStaleTimestamp)
	wantReason(t, "no timestamp", Verify(src, http.Header{"X-Slack-Signature": {"v0=00"}}, oddBody, recv), ReasonMissingSignature)
	// A timestamp swapped after signing breaks the signature (it is signed).
	h2 := h.Clone()
	h2.Set("X-Slack-Request-Timestamp", strconv.FormatInt(recv.Unix(), 10))
	wantReason(t, "timestamp swapped", Verify(src, h2, oddBody, recv), ReasonBadSignature)
}

func TestStandardWebhooksSignaturesFromTheirLibrary(t *testing.T) {
	current, previous := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	src := &Source{ID: "std", Kind: KindStandard, Secret: current, PreviousSecret: previous, ToleranceSeconds: 300}
	sign := func(secret string, at time.Time, body []byte) http.Header {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("msg_1", at, body)
		if err != nil {
			t.Fatal(err)
		}
		return http.Header{
			"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {strconv.FormatInt(at.Unix(), 10)}, "Webhook-Signature": {sig},
		}
	}
	h := sign(current, recv.Add(-time.Minute), oddBody)
	wantReason(t, "current secret", Verify(src, h, oddBody, recv), "")
	wantReason(t, "previous secret", Verify(src, sign(previous, recv, oddBody), oddBody, recv), "")
	wantReason(t, "tampered bytes", Verify(src, h, tampered(oddBody), recv), ReasonBadSignature)
	other, _ := NewSecret(KindStandard)
	wantReason(t, "wrong secret", Verify(src, sign(other, recv, oddBody), oddBody, recv), ReasonBadSignature)
	wantReason(t, "stale timestamp", Verify(src, sign(current, recv.Add(-10*time.Minute), oddBody), oddBody, recv), ReasonStaleTimestamp)
	h2 := h.Clone()
	h2.Set("webhook-id", "msg_2")
	wantReason(t, "id swapped", Verify(src, h2, oddBody, recv), ReasonBadSignature)
	h2 = h.Clone()
	h2.Del("webhook-signature")
	wantReason(t, "no signature", Verify(src, h2, oddBody, recv), ReasonMissingSignature)
	// Laneway's own signer produces what the library verifies; the two agree.
	own, err := signing.Headers("msg_1", recv, oddBody, []string{current})
	if err != nil {
		t.Fatal(err)
	}
	wantReason(t, "Laneway-signed", Verify(src, own, oddBody, recv), "")
}

func TestClassifyIsTheOneMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fail(ReasonUnmapped, "x"), ReasonUnmapped},
		{&signing.HeaderError{Name: "webhook-id", Missing: true}, ReasonMissingSignature},
		{&signing.HeaderError{Name: "webhook-id"}, ReasonBadSignature},
		{&signing.TimestampError{}, ReasonStaleTimestamp},
		{&signing.MismatchError{}, ReasonBadSignature},
		{&http.MaxBytesError{Limit: 1}, ReasonTooLarge},
		{ErrUnknownSource, ReasonUnknownSource},
		{errors.New("boom"), ReasonInternal},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
