package secretbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func mustRing(t *testing.T, keys ...Key) *Ring {
	t.Helper()
	r, err := NewRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRoundTrip(t *testing.T) {
	r := mustRing(t, NewKey("k1"))
	plain := []byte("whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0")
	s := r.Seal("endpoint/ep_1", plain)
	if s.KeyID != "k1" || s.Alg != Alg {
		t.Fatalf("sealed %+v", s)
	}
	if bytes.Contains(s.Data, plain) {
		t.Fatal("ciphertext holds the plaintext")
	}
	got, err := r.Open("endpoint/ep_1", s)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if again := r.Seal("endpoint/ep_1", plain); bytes.Equal(again.Nonce, s.Nonce) {
		t.Fatal("two seals share a nonce")
	}
}

func TestWrongAADFails(t *testing.T) {
	r := mustRing(t, NewKey("k1"))
	s := r.Seal("endpoint/ep_1", []byte("secret"))
	if _, err := r.Open("endpoint/ep_2", s); err == nil {
		t.Fatal("a value sealed for ep_1 opened as ep_2's")
	}
	s.Data[0] ^= 1
	if _, err := r.Open("endpoint/ep_1", s); err == nil {
		t.Fatal("an altered value opened")
	}
}

func TestUnknownKeyID(t *testing.T) {
	old := mustRing(t, NewKey("k1"))
	s := old.Seal("a", []byte("secret"))
	other := mustRing(t, NewKey("k2"))
	_, err := other.Open("a", s)
	var uk *UnknownKeyError
	if !errors.As(err, &uk) || uk.KeyID != "k1" {
		t.Fatalf("Open with a ring lacking k1 = %v, want UnknownKeyError{k1}", err)
	}
	var none *Ring
	if _, err := none.Open("a", s); !errors.Is(err, ErrNoRing) {
		t.Fatalf("Open without a ring = %v, want ErrNoRing", err)
	}
	s.Alg = "none"
	if _, err := old.Open("a", s); err == nil {
		t.Fatal("an unknown algorithm was accepted")
	}
}

func TestRotationNewestSealsOldStillOpens(t *testing.T) {
	k1, k2 := NewKey("k1"), NewKey("k2")
	before := mustRing(t, k1)
	old := before.Seal("a", []byte("old"))
	after := mustRing(t, k1, k2)
	if after.WriteKeyID() != "k2" {
		t.Fatalf("write key = %s, want the last one, k2", after.WriteKeyID())
	}
	if s := after.Seal("a", []byte("new")); s.KeyID != "k2" {
		t.Fatalf("new seal under %s, want k2", s.KeyID)
	}
	if got, err := after.Open("a", old); err != nil || string(got) != "old" {
		t.Fatalf("old value under the rotated ring = %q, %v", got, err)
	}
}

func TestNewRingRefusesBadKeys(t *testing.T) {
	for name, keys := range map[string][]Key{
		"none":      nil,
		"short key": {{ID: "k1", Bytes: make([]byte, 16)}},
		"bad id":    {{ID: "k 1", Bytes: make([]byte, KeySize)}},
		"dup id":    {NewKey("k1"), NewKey("k1")},
	} {
		if _, err := NewRing(keys...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseKeyFile(t *testing.T) {
	k1, k2 := NewKey("k1"), NewKey("2026-11")
	r, err := ParseKeyFile([]byte("# keys\n\n" + FormatKey(k1) + "  " + FormatKey(k2)))
	if err != nil {
		t.Fatal(err)
	}
	if r.WriteKeyID() != "2026-11" || !r.Has("k1") {
		t.Fatalf("write %s, has k1 %v", r.WriteKeyID(), r.Has("k1"))
	}
	for name, content := range map[string]string{
		"empty":      "# nothing\n",
		"one field":  "k1\n",
		"not base64": "k1 !!!\n",
		"short":      "k1 c2hvcnQ=\n",
	} {
		if _, err := ParseKeyFile([]byte(content)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestEnsureKeyFileCreatesOnceThenLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "secrets.key")
	r1, created, err := EnsureKeyFile(path)
	if err != nil || !created {
		t.Fatalf("first EnsureKeyFile: created %v, %v", created, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", st.Mode(), err)
	}
	s := r1.Seal("a", []byte("kept"))
	r2, created, err := EnsureKeyFile(path)
	if err != nil || created {
		t.Fatalf("second EnsureKeyFile: created %v, %v", created, err)
	}
	if got, err := r2.Open("a", s); err != nil || string(got) != "kept" {
		t.Fatalf("the reloaded key does not open the first one's value: %q, %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("data dir holds %d files, want only the key file", len(entries))
	}
	if _, err := LoadKeyFile(filepath.Join(t.TempDir(), "absent")); err == nil || !strings.Contains(err.Error(), "secrets key file") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestSealJSON(t *testing.T) {
	r := mustRing(t, NewKey("k1"))
	type secret struct{ Value string }
	s, err := r.SealJSON("a", []secret{{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	var out []secret
	if err := r.OpenJSON("a", s, &out); err != nil || len(out) != 1 || out[0].Value != "x" {
		t.Fatalf("OpenJSON = %v, %v", out, err)
	}
}

// Keys created for two data directories get distinct ids, so that both can
// share one key file (a lost key found again beside its successor).
func TestCreatedKeysHaveUniqueIDs(t *testing.T) {
	r1, _, err1 := EnsureKeyFile(filepath.Join(t.TempDir(), "secrets.key"))
	r2, _, err2 := EnsureKeyFile(filepath.Join(t.TempDir(), "secrets.key"))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if r1.WriteKeyID() == r2.WriteKeyID() {
		t.Fatalf("two created keys are both named %q", r1.WriteKeyID())
	}
	if !regexp.MustCompile(`^k-\d{8}-[0-9a-f]{8}$`).MatchString(r1.WriteKeyID()) {
		t.Fatalf("created key id %q, want k-<date>-<random>", r1.WriteKeyID())
	}
	both := FormatKey(Key{ID: r1.WriteKeyID(), Bytes: make([]byte, KeySize)}) + FormatKey(Key{ID: r2.WriteKeyID(), Bytes: make([]byte, KeySize)})
	if _, err := ParseKeyFile([]byte(both)); err != nil {
		t.Fatalf("the two keys cannot share a file: %v", err)
	}
}

func TestZeroKeyIDs(t *testing.T) {
	almost := make([]byte, KeySize)
	almost[KeySize-1] = 1
	r := mustRing(t, Key{ID: "zero", Bytes: make([]byte, KeySize)}, Key{ID: "almost", Bytes: almost}, NewKey("k1"))
	if got := r.ZeroKeyIDs(); len(got) != 1 || got[0] != "zero" {
		t.Fatalf("ZeroKeyIDs = %v, want [zero]", got)
	}
}
