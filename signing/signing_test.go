package signing_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/laneway/laneway/signing"
)

// testSecret returns a valid secret whose 32-byte key is filled with b.
func testSecret(b byte) string {
	return signing.SecretPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
}

func mustSigner(t testing.TB, secrets ...string) *signing.Signer {
	t.Helper()
	s, err := signing.NewSigner(secrets)
	if err != nil {
		t.Fatalf("NewSigner: %v", err)
	}
	return s
}

// The vector published with the Standard Webhooks reference libraries.
func TestSignKnownVector(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		msgID  = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	got, err := signing.Sign(msgID, time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`), []string{secret})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}

func TestSignRotationVerifiedByOfficialLibrary(t *testing.T) {
	secrets := []string{testSecret(1), testSecret(2), testSecret(3)}
	body := []byte(`{"type":"order.updated","data":{"n":1}}`)
	ts := time.Now() // the official Verify checks against the real clock
	h, err := signing.Headers("evt_1", ts, body, secrets)
	if err != nil {
		t.Fatal(err)
	}
	sigs := strings.Split(h.Get(signing.HeaderSignature), " ")
	if len(sigs) != len(secrets) {
		t.Fatalf("got %d signatures, want one per secret (%d): %q", len(sigs), len(secrets), sigs)
	}
	if h.Get(signing.HeaderTimestamp) != strconv.FormatInt(ts.Unix(), 10) {
		t.Fatalf("timestamp header %q, want %d", h.Get(signing.HeaderTimestamp), ts.Unix())
	}
	for i, secret := range secrets {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("official library rejects the header for secret #%d: %v", i, err)
		}
		// Each secret's own signature, alone, must verify too: receivers
		// that know only the new secret rely on it.
		alone := h.Clone()
		alone.Set(signing.HeaderSignature, sigs[i])
		if err := wh.Verify(body, alone); err != nil {
			t.Errorf("signature #%d alone rejected: %v", i, err)
		}
	}
	stranger, _ := standardwebhooks.NewWebhook(testSecret(9))
	if err := stranger.Verify(body, h); err == nil {
		t.Error("official library accepted the header with a secret we did not sign with")
	}
}

func TestVerifyAcceptsOfficialLibrarySignature(t *testing.T) {
	secret := testSecret(7)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"hello":"world"}`)
	sig, err := wh.Sign("msg_42", now, body)
	if err != nil {
		t.Fatal(err)
	}
	signed := http.Header{}
	signed.Set(standardwebhooks.HeaderWebhookID, "msg_42")
	signed.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	signed.Set(standardwebhooks.HeaderWebhookSignature, sig)

	// Rotation on the receiver side: the matching secret is not the first.
	secrets := []string{testSecret(8), secret}
	if err := signing.Verify(signed, body, secrets, 0, now); err != nil {
		t.Fatalf("Verify rejects the official signature: %v", err)
	}

	tampered := []struct {
		name   string
		body   []byte
		header func(http.Header)
	}{
		{"body", []byte(`{"hello":"World"}`), func(http.Header) {}},
		{"id", body, func(h http.Header) { h.Set(signing.HeaderID, "msg_43") }},
		{"timestamp", body, func(h http.Header) {
			h.Set(signing.HeaderTimestamp, strconv.FormatInt(now.Unix()+1, 10))
		}},
	}
	for _, tc := range tampered {
		t.Run(tc.name, func(t *testing.T) {
			h := signed.Clone()
			tc.header(h)
			err := signing.Verify(h, tc.body, secrets, 0, now)
			var mismatch *signing.MismatchError
			if !errors.As(err, &mismatch) {
				t.Fatalf("Verify(tampered %s) = %v, want *MismatchError", tc.name, err)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	secret := testSecret(5)
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"a":1}`)
	signedAt := func(ts time.Time) http.Header {
		h, err := signing.Headers("msg_1", ts, body, []string{secret})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	with := func(h http.Header, name, value string) http.Header {
		h = h.Clone()
		if value == "" {
			h.Del(name)
		} else {
			h.Set(name, value)
		}
		return h
	}
	valid := signedAt(now)
	otherSig, _ := signing.Sign("msg_1", now, body, []string{testSecret(6)})

	tests := []struct {
		name      string
		header    http.Header
		tolerance time.Duration
		check     func(t *testing.T, err error)
	}{
		{"valid", valid, 0, wantNil},
		{"missing id", with(valid, signing.HeaderID, ""), 0, wantHeader(signing.HeaderID, true)},
		{"missing timestamp", with(valid, signing.HeaderTimestamp, ""), 0, wantHeader(signing.HeaderTimestamp, true)},
		{"missing signature", with(valid, signing.HeaderSignature, ""), 0, wantHeader(signing.HeaderSignature, true)},
		{"timestamp not a number", with(valid, signing.HeaderTimestamp, "12a"), 0, wantHeader(signing.HeaderTimestamp, false)},
		{"timestamp in milliseconds", with(valid, signing.HeaderTimestamp, strconv.FormatInt(now.UnixMilli(), 10)), 0, wantTimestamp(true)},
		{"stale beyond default tolerance", signedAt(now.Add(-signing.DefaultTolerance - time.Second)), 0, wantTimestamp(false)},
		{"future beyond default tolerance", signedAt(now.Add(signing.DefaultTolerance + time.Second)), 0, wantTimestamp(true)},
		{"stale exactly at tolerance", signedAt(now.Add(-signing.DefaultTolerance)), 0, wantNil},
		{"stale within custom tolerance", signedAt(now.Add(-time.Hour)), 2 * time.Hour, wantNil},
		{"stale beyond custom tolerance", signedAt(now.Add(-time.Minute)), 30 * time.Second, wantTimestamp(false)},
		{"wrong secret", with(valid, signing.HeaderSignature, otherSig), 0, wantMismatch(1)},
		{"matching signature second", with(valid, signing.HeaderSignature, otherSig+" "+valid.Get(signing.HeaderSignature)), 0, wantNil},
		{"unknown versions ignored", with(valid, signing.HeaderSignature, "v1a,"+strings.TrimPrefix(valid.Get(signing.HeaderSignature), "v1,")), 0, wantMismatch(0)},
		{"signature without version", with(valid, signing.HeaderSignature, strings.TrimPrefix(valid.Get(signing.HeaderSignature), "v1,")), 0, wantMismatch(0)},
		{"truncated signature", with(valid, signing.HeaderSignature, valid.Get(signing.HeaderSignature)[:20]), 0, wantMismatch(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, signing.Verify(tc.header, body, []string{secret}, tc.tolerance, now))
		})
	}
}

func wantNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("err = %v, want nil", err)
	}
}

func wantHeader(name string, missing bool) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var he *signing.HeaderError
		if !errors.As(err, &he) || he.Name != name || he.Missing != missing {
			t.Fatalf("err = %#v, want HeaderError{Name: %q, Missing: %v}", err, name, missing)
		}
	}
}

func wantTimestamp(future bool) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var te *signing.TimestampError
		if !errors.As(err, &te) || te.Future() != future {
			t.Fatalf("err = %v, want TimestampError with Future() = %v", err, future)
		}
	}
}

func wantMismatch(signatures int) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var me *signing.MismatchError
		if !errors.As(err, &me) || me.Signatures != signatures {
			t.Fatalf("err = %v, want MismatchError{Signatures: %d}", err, signatures)
		}
	}
}

func TestNewSignerRejectsMalformedSecrets(t *testing.T) {
	const leaky = "not-a-secret-but-should-not-leak"
	tests := []struct {
		name    string
		secrets []string
	}{
		{"no prefix", []string{base64.StdEncoding.EncodeToString([]byte(leaky))}},
		{"not base64", []string{signing.SecretPrefix + leaky + "!"}},
		{"empty key", []string{signing.SecretPrefix}},
		{"second one bad", []string{testSecret(1), "whsec_" + leaky + "%"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := signing.NewSigner(tc.secrets)
			var se *signing.SecretError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *SecretError", err)
			}
			if se.Index != len(tc.secrets)-1 {
				t.Errorf("Index = %d, want %d", se.Index, len(tc.secrets)-1)
			}
			if strings.Contains(err.Error(), leaky) {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
	if _, err := signing.NewSigner(nil); !errors.Is(err, signing.ErrNoSecrets) {
		t.Errorf("NewSigner(nil) = %v, want ErrNoSecrets", err)
	}
	if _, err := signing.Sign("id", time.Now(), nil, nil); !errors.Is(err, signing.ErrNoSecrets) {
		t.Errorf("Sign without secrets = %v, want ErrNoSecrets", err)
	}
}

// The Signer pools HMAC states; concurrent use must neither race nor mix up
// one signature's state with another's.
func TestSignerConcurrentUse(t *testing.T) {
	s := mustSigner(t, testSecret(1), testSecret(2))
	ts := time.Unix(1_700_000_000, 0)
	want := make([]string, 64)
	for i := range want {
		want[i] = s.Sign("msg_"+strconv.Itoa(i), ts, []byte(strings.Repeat("x", i*37)))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for round := range 50 {
				i := (g*50 + round) % len(want)
				if got := s.Sign("msg_"+strconv.Itoa(i), ts, []byte(strings.Repeat("x", i*37))); got != want[i] {
					t.Errorf("concurrent Sign #%d = %q, want %q", i, got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}

func FuzzVerify(f *testing.F) {
	f.Add("msg_1", int64(1_700_000_000), []byte(`{"a":1}`), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	f.Add("", int64(-1), []byte{}, "v1, v1,, ,v1 v1a,abc")
	f.Add("id.with.dots", int64(1<<62), []byte("\x00\xff"), strings.Repeat("v1,", 100))
	secret := testSecret(3)
	s := mustSigner(f, secret)
	f.Fuzz(func(t *testing.T, msgID string, unix int64, body []byte, sigHeader string) {
		ts := time.Unix(unix, 0)
		h := http.Header{}
		h.Set(signing.HeaderID, msgID)
		h.Set(signing.HeaderTimestamp, strconv.FormatInt(unix, 10))
		h.Set(signing.HeaderSignature, sigHeader)
		_ = s.Verify(h, body, time.Minute, ts) // must not panic

		// What we sign, we verify, whatever the inputs.
		if msgID == "" {
			return
		}
		s.SetHeaders(h, msgID, ts, body)
		if err := s.Verify(h, body, time.Minute, ts); err != nil {
			t.Fatalf("Verify rejects our own signature: %v", err)
		}
	})
}

func BenchmarkSignerSign(b *testing.B) {
	s := mustSigner(b, testSecret(1), testSecret(2))
	body := bytes.Repeat([]byte(`{"k":"v"}`), 100)
	ts := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		_ = s.Sign("evt_0123456789", ts, body)
	}
}
