// Package signing signs and verifies webhook deliveries the Standard Webhooks
// way (https://www.standardwebhooks.com/): the webhook-id, webhook-timestamp
// and webhook-signature headers, the last holding one "v1,<base64 HMAC-SHA256>"
// per secret, separated by spaces, so that receivers keep verifying while an
// endpoint rotates its secret.
//
// Build a Signer once per set of secrets and reuse it: it decodes the secrets
// once and recycles its HMAC states, which matters at thousands of deliveries
// per second. The package functions Sign, Headers and Verify are conveniences
// that build a throwaway Signer.
package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// Header names from the Standard Webhooks spec.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every secret; the rest is the base64 (standard
// alphabet, padded) of the HMAC key.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a timestamp may be from now when Verify is given
// a tolerance of zero or less. It is the spec's recommended five minutes.
const DefaultTolerance = 5 * time.Minute

// signatureVersion prefixes each symmetric (HMAC) signature.
const signatureVersion = "v1,"

// encodedMACLen is the length of a padded base64-encoded HMAC-SHA256 (44).
const encodedMACLen = (sha256.Size + 2) / 3 * 4

// Signer signs and verifies with a fixed set of secrets. It is safe for
// concurrent use. Build it with NewSigner.
type Signer struct {
	keys []*key
}

// key is one decoded secret with a pool of HMAC states keyed by it: hmac.New
// allocates and hashes the key's pads, Reset on a used state does neither.
type key struct {
	states sync.Pool // of *macState
}

// macState is one reusable HMAC computation and its scratch space.
type macState struct {
	mac    hash.Hash
	prefix []byte // msgID "." unix seconds "."
	sum    [sha256.Size]byte
}

// NewSigner decodes secrets ("whsec_" + base64 key) once. Every secret signs;
// pass the old and the new one during a rotation. It fails on an empty list or
// a malformed secret, without quoting the secret.
func NewSigner(secrets []string) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, ErrNoSecrets
	}
	s := &Signer{keys: make([]*key, 0, len(secrets))}
	for i, secret := range secrets {
		raw, err := decodeSecret(secret)
		if err != nil {
			return nil, &SecretError{Index: i, Reason: err.Error()}
		}
		s.keys = append(s.keys, newKey(raw))
	}
	return s, nil
}

func decodeSecret(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, constError("does not start with " + SecretPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, constError("is not base64 after " + SecretPrefix)
	}
	if len(raw) == 0 {
		return nil, constError("has an empty key")
	}
	return raw, nil
}

func newKey(raw []byte) *key {
	k := &key{}
	k.states.New = func() any {
		return &macState{mac: hmac.New(sha256.New, raw), prefix: make([]byte, 0, 64)}
	}
	return k
}

// mac appends the base64 HMAC of msgID.unixSeconds.body under k to dst.
func (k *key) mac(dst []byte, msgID string, unix int64, body []byte) []byte {
	st := k.states.Get().(*macState)
	defer k.states.Put(st)
	st.mac.Reset()
	st.prefix = append(st.prefix[:0], msgID...)
	st.prefix = append(st.prefix, '.')
	st.prefix = strconv.AppendInt(st.prefix, unix, 10)
	st.prefix = append(st.prefix, '.')
	st.mac.Write(st.prefix)
	st.mac.Write(body)
	return base64.StdEncoding.AppendEncode(dst, st.mac.Sum(st.sum[:0]))
}

// Sign returns the webhook-signature value: one "v1,<base64>" per secret,
// separated by single spaces, in the order the secrets were given.
func (s *Signer) Sign(msgID string, ts time.Time, body []byte) string {
	return string(s.AppendSignature(make([]byte, 0, len(s.keys)*(len(signatureVersion)+encodedMACLen+1)), msgID, ts, body))
}

// AppendSignature appends the webhook-signature value (as Sign returns it)
// to dst: for a caller that writes the header into a buffer of its own.
func (s *Signer) AppendSignature(dst []byte, msgID string, ts time.Time, body []byte) []byte {
	for i, k := range s.keys {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, signatureVersion...)
		dst = k.mac(dst, msgID, ts.Unix(), body)
	}
	return dst
}

// SetHeaders sets webhook-id, webhook-timestamp and webhook-signature on h.
// The timestamp is ts in whole Unix seconds, the same value that is signed.
func (s *Signer) SetHeaders(h http.Header, msgID string, ts time.Time, body []byte) {
	h.Set(HeaderID, msgID)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, s.Sign(msgID, ts, body))
}

// Headers returns a new header holding the three webhook headers.
func (s *Signer) Headers(msgID string, ts time.Time, body []byte) http.Header {
	h := make(http.Header, 3)
	s.SetHeaders(h, msgID, ts, body)
	return h
}

// Verify checks that h carries a webhook-id, a webhook-timestamp within
// tolerance of now (DefaultTolerance if tolerance <= 0) and at least one v1
// signature of body made with any of the Signer's secrets. Signatures of other
// versions are ignored, as the spec asks. MACs are compared in constant time.
func (s *Signer) Verify(h http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	msgID, tsRaw, sigs, err := requiredHeaders(h)
	if err != nil {
		return err
	}
	unix, err := strconv.ParseInt(tsRaw, 10, 64)
	if err != nil {
		return &HeaderError{Name: HeaderTimestamp}
	}
	if err := checkTimestamp(time.Unix(unix, 0), now, tolerance); err != nil {
		return err
	}
	var enc [64]byte
	for _, k := range s.keys {
		want := k.mac(enc[:0], msgID, unix, body)
		if matchesAny(want, sigs) {
			return nil
		}
	}
	return &MismatchError{Signatures: countV1(sigs)}
}

func requiredHeaders(h http.Header) (msgID, ts, sigs string, err error) {
	for _, f := range []struct {
		name string
		dst  *string
	}{{HeaderID, &msgID}, {HeaderTimestamp, &ts}, {HeaderSignature, &sigs}} {
		*f.dst = h.Get(f.name)
		if *f.dst == "" {
			return "", "", "", &HeaderError{Name: f.name, Missing: true}
		}
	}
	return msgID, ts, sigs, nil
}

// checkTimestamp refuses replays of old deliveries and timestamps from the
// future. now.Sub saturates, so absurd timestamps cannot overflow.
func checkTimestamp(ts, now time.Time, tolerance time.Duration) error {
	tolerance = valutil.PositiveOr(tolerance, DefaultTolerance)
	if skew := now.Sub(ts); skew > tolerance || skew < -tolerance {
		return &TimestampError{Timestamp: ts, Now: now, Tolerance: tolerance}
	}
	return nil
}

func matchesAny(want []byte, sigs string) bool {
	for sig := range strings.SplitSeq(sigs, " ") {
		got, ok := strings.CutPrefix(sig, signatureVersion)
		if ok && subtle.ConstantTimeCompare(want, []byte(got)) == 1 {
			return true
		}
	}
	return false
}

func countV1(sigs string) int {
	n := 0
	for sig := range strings.SplitSeq(sigs, " ") {
		if strings.HasPrefix(sig, signatureVersion) {
			n++
		}
	}
	return n
}

// Sign signs with secrets; see Signer.Sign.
func Sign(msgID string, ts time.Time, body []byte, secrets []string) (string, error) {
	s, err := NewSigner(secrets)
	if err != nil {
		return "", err
	}
	return s.Sign(msgID, ts, body), nil
}

// Headers returns the three webhook headers signed with secrets; see
// Signer.Headers.
func Headers(msgID string, ts time.Time, body []byte, secrets []string) (http.Header, error) {
	s, err := NewSigner(secrets)
	if err != nil {
		return nil, err
	}
	return s.Headers(msgID, ts, body), nil
}

// Verify verifies with secrets; see Signer.Verify.
func Verify(h http.Header, body []byte, secrets []string, tolerance time.Duration, now time.Time) error {
	s, err := NewSigner(secrets)
	if err != nil {
		return err
	}
	return s.Verify(h, body, tolerance, now)
}
