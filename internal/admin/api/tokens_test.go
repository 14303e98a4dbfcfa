package api

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

func TestParseAdminTokensAccepts(t *testing.T) {
	const a = "9f3c1a7e52b04d8e6a1f0c93b7d25e48"                 // 32 bytes: openssl rand -hex 16
	const b = "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5Cg==" // base64
	for in, want := range map[string][]string{
		"":                    nil,
		" \n":                 nil,
		a:                     {a},
		a + "\n":              {a},
		a + "," + b:           {a, b},
		a + "\r\n" + b + "\n": {a, b},
		" " + a + " , " + b:   {a, b},
	} {
		got, err := ParseAdminTokens(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseAdminTokens(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestParseAdminTokensRefuses(t *testing.T) {
	const good = "9f3c1a7e52b04d8e6a1f0c93b7d25e48"
	for name, tc := range map[string]struct{ in, wantErr string }{
		"short":               {"test-admin-token", "16 bytes, at least 32"},
		"31 bytes":            {good[:31], "31 bytes"},
		"three":               {good + "," + good + "," + good, "at most 2"},
		"second short":        {good + ",short", "admin token 2 of 2"},
		"compose placeholder": {"change-me-to-a-long-random-string-please", "placeholder"},
		"k8s placeholder":     {"REPLACE-ME-with-a-long-random-token", "placeholder"},
		"space inside":        {"0123456789abcdef 0123456789abcdef", "only letters"},
		"quote inside":        {`0123456789abcdef"0123456789abcdef`, "only letters"},
		"only padding":        {strings.Repeat("=", 40), "only letters"},
		// Long enough, but guessable (#27, item 9).
		"one character":        {strings.Repeat("a", 32), "distinct characters"},
		"a repeated word":      {strings.Repeat("password", 4), "7 distinct characters"},
		"a repeated phrase":    {strings.Repeat("Summer2024", 3) + "xy", "repeats"},
		"a repeated word and":  {strings.Repeat("password", 4) + "1x", "repeats"},
		"a counter in a name":  {"cli-test-token-0123456789abcdef0123", "sequence"},
		"a repeated hex count": {"0123456789abcdef0123456789abcdef", "repeats"},
		"a sequence":           {"abcdefghijklmnopqrstuvwxyz012345", "sequence"},
		"few characters":       {"abababababababababababcbcbcbcbcbcbcbcbc", "distinct characters"},
		"low entropy":          {"kaqaazaamaaxaawaapaaraavaaya1aa2", "bits"},
	} {
		_, err := ParseAdminTokens(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want one containing %q", name, err, tc.wantErr)
			continue
		}
		if strings.HasPrefix(err.Error(), "admin token ") && !strings.Contains(err.Error(), "openssl rand -hex 32") {
			t.Errorf("%s: the error does not say how to make a good token: %v", name, err)
		}
		if tok := strings.Split(tc.in, ",")[0]; len(tok) > 8 && strings.Contains(err.Error(), tok) {
			t.Errorf("%s: the error repeats the token: %v", name, err)
		}
	}
}

// Random tokens as the docs tell operators to make them always pass the
// strength check: 1,000 of each kind, so a rule that refuses some random
// tokens fails here rather than at an operator's start.
func TestParseAdminTokensAcceptsRandomTokens(t *testing.T) {
	for i := range 1000 {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		for _, tok := range []string{hex.EncodeToString(b), hex.EncodeToString(b[:16]), base64.StdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b[:24])} {
			if _, err := ParseAdminTokens(tok); err != nil {
				t.Fatalf("random token %d (%d bytes) refused: %v", i, len(tok), err)
			}
		}
	}
}
