package signing_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/signing"
)

// FuzzVerifySignedOnly checks that verification accepts exactly what was
// signed. The seed corpus is in testdata/fuzz/FuzzVerifySignedOnly; run the
// fuzzer with
//
//	go test -run '^$' -fuzz FuzzVerifySignedOnly -fuzztime 60s ./signing/
//
// With arbitrary headers, body and secret, signing.Verify must not panic
// and must succeed exactly when the webhook-id is present, the timestamp
// parses and is within tolerance, and one space-separated signature is the
// v1 HMAC of those inputs. And a signature made for one (id, timestamp,
// body, secret) must fail, as a mismatch, once any one of them changes.
func FuzzVerifySignedOnly(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef"), "msg_p5jXN8AQM9LWM0D4loKWxJek", "1700000000", []byte(`{"test": 2432232314}`), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", uint16(0))
	f.Add([]byte{0}, "", "", []byte{}, "", uint16(1))
	f.Add([]byte("k"), "id.with.dots", "+1700000000", []byte("\x00\xff"), "v1, v1,, ,v1 v1a,abc v2,xyz", uint16(7))
	f.Add([]byte("k"), "evt", "1700000301", []byte("{}"), strings.Repeat("v1,AAAA ", 64), uint16(65535))
	f.Add([]byte("k"), "evt", "-9223372036854775808", []byte("{}"), "v1,", uint16(3))

	now := time.Unix(1_700_000_000, 0)
	const tolerance = 5 * time.Minute
	f.Fuzz(func(t *testing.T, key []byte, msgID, tsHeader string, body []byte, sigHeader string, flip uint16) {
		// Arbitrary secrets (this one may be malformed) never panic.
		h := http.Header{}
		h.Set(signing.HeaderID, msgID)
		h.Set(signing.HeaderTimestamp, tsHeader)
		h.Set(signing.HeaderSignature, sigHeader)
		_ = signing.Verify(h, body, []string{string(key)}, tolerance, now)
		if len(key) == 0 {
			key = []byte{0}
		}
		secret := signing.SecretPrefix + base64.StdEncoding.EncodeToString(key)
		s := mustSigner(t, secret)

		// Arbitrary headers: success exactly when the definition says so.
		err := s.Verify(h, body, tolerance, now)
		if want := acceptable(s, msgID, tsHeader, body, sigHeader, now, tolerance); (err == nil) != want {
			t.Fatalf("Verify(id %q, ts %q, sig %q) = %v, want success=%v", msgID, tsHeader, sigHeader, err, want)
		}

		// Sign, then change one thing at a time.
		if msgID == "" {
			msgID = "msg"
		}
		ts := now.Add(time.Duration(int64(flip)%600-300) * time.Second) // within tolerance
		signed := s.Headers(msgID, ts, body)
		if err := s.Verify(signed, body, tolerance, now); err != nil {
			t.Fatalf("Verify rejects our own signature: %v", err)
		}
		mismatch := func(what string, h http.Header, body []byte, s *signing.Signer) {
			t.Helper()
			var me *signing.MismatchError
			if err := s.Verify(h, body, tolerance, now); !errors.As(err, &me) {
				t.Fatalf("%s: Verify = %v, want a *MismatchError", what, err)
			}
		}
		// Body: flip one bit, or append a byte to an empty one.
		mutated := slices.Clone(body)
		if len(mutated) == 0 {
			mutated = []byte{byte(flip)}
		} else {
			mutated[int(flip)%len(mutated)] ^= 1 << (flip % 8)
		}
		mismatch("body changed", signed, mutated, s)
		mismatch("body extended", signed, append(slices.Clone(body), '\n'), s)
		if len(body) > 0 {
			mismatch("body truncated", signed, body[:len(body)-1], s)
		}
		// Message id.
		other := signed.Clone()
		other.Set(signing.HeaderID, msgID+"x")
		mismatch("id changed", other, body, s)
		// Timestamp, by one second (still within tolerance).
		other = signed.Clone()
		other.Set(signing.HeaderTimestamp, strconv.FormatInt(ts.Unix()+1, 10))
		mismatch("timestamp changed", other, body, s)
		// Signature: one base64 character changed.
		other = signed.Clone()
		sig := []byte(other.Get(signing.HeaderSignature))
		i := len("v1,") + int(flip)%(len(sig)-len("v1,")-1) // not the padding
		sig[i] = map[bool]byte{true: 'B', false: 'A'}[sig[i] == 'A']
		other.Set(signing.HeaderSignature, string(sig))
		mismatch("signature changed", other, body, s)
		// Secret: a different key.
		otherKey := slices.Clone(key)
		otherKey[int(flip)%len(otherKey)] ^= 0x80
		mismatch("secret changed", signed, body, mustSigner(t, signing.SecretPrefix+base64.StdEncoding.EncodeToString(otherKey)))
	})
}

// acceptable is the definition of a valid delivery for one signer.
func acceptable(s *signing.Signer, msgID, tsHeader string, body []byte, sigHeader string, now time.Time, tolerance time.Duration) bool {
	if msgID == "" || tsHeader == "" || sigHeader == "" {
		return false
	}
	unix, err := strconv.ParseInt(tsHeader, 10, 64)
	if err != nil {
		return false
	}
	ts := time.Unix(unix, 0)
	if skew := now.Sub(ts); skew > tolerance || skew < -tolerance {
		return false
	}
	want := s.Sign(msgID, ts, body) // one "v1,…" with one secret
	return slices.Contains(strings.Split(sigHeader, " "), want)
}
