package api

import (
	"slices"
	"strings"
	"testing"
)

func TestParseAdminTokensAccepts(t *testing.T) {
	const a = "0123456789abcdef0123456789abcdef"                 // 32 bytes
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
	const good = "0123456789abcdef0123456789abcdef"
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
	} {
		_, err := ParseAdminTokens(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want one containing %q", name, err, tc.wantErr)
			continue
		}
		if tok := strings.Split(tc.in, ",")[0]; len(tok) > 8 && strings.Contains(err.Error(), tok) {
			t.Errorf("%s: the error repeats the token: %v", name, err)
		}
	}
}
