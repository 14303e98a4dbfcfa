// Package secretbox seals the secrets Laneway keeps on Kafka (endpoint
// signing secrets, inbound source secrets) with AES-256-GCM under a key
// ring, so that a reader of the topics learns nothing from them and a
// record's sealed value cannot be moved to another record.
//
// A ring holds several keys at once, each named by a key id. Seal always
// uses the newest key (the ring's last); every sealed value names the key
// it was sealed under, and Open uses that key, so the key can rotate: add a
// key, rewrite the records (laneway secrets rekey), drop the old key. The
// associated data given to Seal and Open binds a sealed value to the record
// it belongs to (callers pass a kind and the record's id).
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Alg names the only algorithm a Sealed value may use.
const Alg = "A256GCM"

// KeySize is the length of every key: AES-256.
const KeySize = 32

// Sealed is a sealed value as it is stored (JSON inside a record).
type Sealed struct {
	// Alg is always "A256GCM"; anything else is refused, so that a future
	// format is never misread as this one.
	Alg string `json:"alg"`
	// KeyID names the ring key the value was sealed under.
	KeyID string `json:"kid"`
	// Nonce is GCM's 12-byte nonce, random per seal.
	Nonce []byte `json:"nonce"`
	// Data is the ciphertext followed by GCM's 16-byte tag.
	Data []byte `json:"data"`
}

// UnknownKeyError is returned by Open for a value sealed under a key id the
// ring does not hold (a key removed too early, or an instance started
// without the newest key file).
type UnknownKeyError struct{ KeyID string }

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("secrets sealed under key %q, which the key file does not hold", e.KeyID)
}

// ErrNoRing is returned when a sealed value is read without any key ring
// (an instance started with --allow-plaintext-secrets and no key file).
var ErrNoRing = errors.New("secrets are sealed but no key file is configured (--secrets-key-file)")

// Key is one ring key.
type Key struct {
	ID    string
	Bytes []byte // KeySize bytes
}

// Ring is an ordered set of keys; the last one seals. It is immutable and
// safe for concurrent use.
type Ring struct {
	byID  map[string]cipher.AEAD
	write string
	zero  []string // ids of all-zero keys, in ring order
}

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// NewRing builds a ring from keys, oldest first: the last key seals.
func NewRing(keys ...Key) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("secrets key ring: no key")
	}
	r := &Ring{byID: make(map[string]cipher.AEAD, len(keys))}
	for _, k := range keys {
		if !keyIDPattern.MatchString(k.ID) {
			return nil, fmt.Errorf("secrets key id %q: must be 1 to 64 of A-Z, a-z, 0-9, '.', '_' and '-'", k.ID)
		}
		if len(k.Bytes) != KeySize {
			return nil, fmt.Errorf("secrets key %q: is %d bytes, must be %d", k.ID, len(k.Bytes), KeySize)
		}
		if _, dup := r.byID[k.ID]; dup {
			return nil, fmt.Errorf("secrets key id %q appears twice", k.ID)
		}
		block, err := aes.NewCipher(k.Bytes)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		r.byID[k.ID] = aead
		r.write = k.ID
		if !slices.ContainsFunc(k.Bytes, func(b byte) bool { return b != 0 }) {
			r.zero = append(r.zero, k.ID)
		}
	}
	return r, nil
}

// NewKey returns a fresh random key named id.
func NewKey(id string) Key {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return Key{ID: id, Bytes: b}
}

// NewKeyID returns a key id no other key is likely to have:
// "k-<yyyymmdd of now, UTC>-<8 random hex digits>". Generated keys need
// unique ids: a key file may hold an old key and its successor only when
// their ids differ, and a record names its key by id alone.
func NewKeyID(now time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return "k-" + now.UTC().Format("20060102") + "-" + hex.EncodeToString(b)
}

// WriteKeyID is the id of the key Seal uses.
func (r *Ring) WriteKeyID() string { return r.write }

// ZeroKeyIDs are the ids of the ring's all-zero keys: a placeholder
// copied from an example (`head -c32 /dev/zero`), which anyone can use to
// open what it seals. They work, so that a start can name them rather than
// fail; callers warn.
func (r *Ring) ZeroKeyIDs() []string { return slices.Clone(r.zero) }

// Has reports whether the ring holds key id.
func (r *Ring) Has(id string) bool {
	_, ok := r.byID[id]
	return ok
}

// Seal encrypts plaintext under the newest key, bound to aad.
func (r *Ring) Seal(aad string, plaintext []byte) Sealed {
	aead := r.byID[r.write]
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return Sealed{Alg: Alg, KeyID: r.write, Nonce: nonce, Data: aead.Seal(nil, nonce, plaintext, []byte(aad))}
}

// Open decrypts s with the key it names. It fails with *UnknownKeyError
// when the ring lacks that key, and with an error naming the key when the
// value was altered or sealed for other associated data. A nil ring fails
// with ErrNoRing.
func (r *Ring) Open(aad string, s Sealed) ([]byte, error) {
	if r == nil {
		return nil, ErrNoRing
	}
	if s.Alg != Alg {
		return nil, fmt.Errorf("sealed secrets: unknown algorithm %q", s.Alg)
	}
	aead, ok := r.byID[s.KeyID]
	if !ok {
		return nil, &UnknownKeyError{KeyID: s.KeyID}
	}
	if len(s.Nonce) != aead.NonceSize() {
		return nil, fmt.Errorf("sealed secrets: nonce of %d bytes", len(s.Nonce))
	}
	out, err := aead.Open(nil, s.Nonce, s.Data, []byte(aad))
	if err != nil {
		return nil, fmt.Errorf("sealed secrets under key %q do not open: altered, or sealed for another record", s.KeyID)
	}
	return out, nil
}
