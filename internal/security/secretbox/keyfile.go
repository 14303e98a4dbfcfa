package secretbox

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The key file holds one key per line, oldest first: the last key seals.
//
//	# comment lines and blank lines are ignored
//	<key id> <standard base64 of 32 random bytes>
//
// Key ids are 1 to 64 of A-Z, a-z, 0-9, '.', '_' and '-'. A line for a new
// key is made with `laneway secrets new-key <id>` (or
// `echo "<id> $(head -c32 /dev/urandom | base64)"`).

// ParseKeyFile reads a key file's content.
func ParseKeyFile(data []byte) (*Ring, error) {
	var keys []Key
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"<key id> <base64 key>\", got %d fields", n, len(fields))
		}
		b, err := base64.StdEncoding.DecodeString(fields[1])
		if err != nil {
			return nil, fmt.Errorf("line %d (key %q): not standard base64", n, fields[0])
		}
		keys = append(keys, Key{ID: fields[0], Bytes: b})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in the file")
	}
	return NewRing(keys...)
}

// LoadKeyFile reads and parses the key file at path.
func LoadKeyFile(path string) (*Ring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key file: %w", err)
	}
	r, err := ParseKeyFile(data)
	if err != nil {
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	return r, nil
}

// FormatKey is k as a key file line (with its newline).
func FormatKey(k Key) string {
	return k.ID + " " + base64.StdEncoding.EncodeToString(k.Bytes) + "\n"
}

// EnsureKeyFile loads the key file at path, or creates it (CreateKeyFile)
// holding one new key named by NewKeyID when it does not exist. Test kits
// and tools use it; the embedded default creates its key only after
// checking that no record needs the lost one (package app).
func EnsureKeyFile(path string) (r *Ring, created bool, err error) {
	r, err = LoadKeyFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return r, false, err
	}
	return CreateKeyFile(path, NewKey(NewKeyID(time.Now())))
}

// CreateKeyFile creates the key file at path (mode 0600, its directory
// 0700) holding k alone. When the file appears meanwhile (another process
// created it first) it loads that one instead, and created is false.
func CreateKeyFile(path string, k Key) (r *Ring, created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("secrets key file: %w", err)
	}
	content := "# Laneway secrets key file: \"<key id> <base64 of 32 bytes>\" per line, the last one seals.\n" + FormatKey(k)
	// Written aside, then linked into place: a second process racing to
	// create it never overwrites this key nor reads a half-written file.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secrets-key-*")
	if err != nil {
		return nil, false, fmt.Errorf("secrets key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(content)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path)
	}
	if errors.Is(err, fs.ErrExist) {
		r, err = LoadKeyFile(path)
		return r, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("secrets key file: %w", err)
	}
	r, err = NewRing(k)
	return r, true, err
}

// SealJSON seals v's JSON encoding under the newest key.
func (r *Ring) SealJSON(aad string, v any) (*Sealed, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s := r.Seal(aad, b)
	return &s, nil
}

// OpenJSON opens s and decodes its JSON into v.
func (r *Ring) OpenJSON(aad string, s *Sealed, v any) error {
	b, err := r.Open(aad, *s)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
