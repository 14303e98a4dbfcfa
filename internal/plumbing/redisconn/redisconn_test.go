package redisconn_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/laneway/laneway/internal/plumbing/redisconn"
	"github.com/laneway/laneway/internal/plumbing/tlsfiles/tlstest"
)

const secret = "s3cr3t-Pa55"

func TestRedactHidesThePassword(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:" + secret + "@127.0.0.1:6379/0":            "redis://:xxxxx@127.0.0.1:6379/0",
		"rediss://laneway:" + secret + "@redis.internal:6380": "rediss://laneway:xxxxx@redis.internal:6380",
		"redis://127.0.0.1:6379/0":                            "redis://127.0.0.1:6379/0",
		"redis://laneway@127.0.0.1:6379":                      "redis://laneway@127.0.0.1:6379",
		"redis://127.0.0.1:6379/0?password=" + secret:         "redis://127.0.0.1:6379/0?password=xxxxx",
		"redis://u:" + secret + "@host:port-not-a-number":     "redis://(unparsable)",
		"redis://u:" + secret + "@[::1:6379":                  "redis://(unparsable)",
		"u:" + secret + "@nowhere":                            "(unparsable redis url)",
		// Typos that parse, with the password outside the user info.
		"rediss//default:" + secret + "@host:6379": "rediss//default:xxxxx@host:6379",
		"redis:/default:" + secret + "@host:6379":  "redis:/default:xxxxx@host:6379",
		"redis:/" + secret + "@host:6379":          "redis:/xxxxx@host:6379",
	} {
		got := redisconn.Redact(in)
		if got != want || strings.Contains(got, secret) {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOptionsErrorsNeverCarryThePassword(t *testing.T) {
	for _, raw := range []string{
		"redis://u:" + secret + "@[::1:6379",
		"http://u:" + secret + "@host:6379",
		"redis://u:" + secret + "@host:6379/notadb",
		"rediss//default:" + secret + "@host:6379",
		"redis:/default:" + secret + "@host:6379",
	} {
		_, err := redisconn.Config{}.Options(raw)
		if err == nil {
			t.Errorf("%s: accepted", redisconn.Redact(raw))
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains the password", err)
		}
	}
}

func TestOptionsApplyUserAndPassword(t *testing.T) {
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := redisconn.Config{Username: "laneway", PasswordFile: file}.Options("redis://old:old@127.0.0.1:6379/2")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Username != "laneway" || opts.Password != "from-file" || opts.DB != 2 {
		t.Fatalf("options user %q password %q db %d: want laneway, from-file, 2", opts.Username, opts.Password, opts.DB)
	}
	// A rotated file is read by the next connection.
	if err := os.WriteFile(file, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	user, pass, err := opts.CredentialsProviderContext(context.Background())
	if err != nil || user != "laneway" || pass != "rotated" {
		t.Fatalf("credentials %q %q %v: want laneway, rotated", user, pass, err)
	}
}

func TestOptionsRefuseBadCombinations(t *testing.T) {
	f := tlstest.Write(t)
	for _, tc := range []struct {
		name string
		cfg  redisconn.Config
		url  string
		want string
	}{
		{"password twice", redisconn.Config{Password: "a", PasswordFile: "b"}, "redis://h:6379", "given twice"},
		{"tls settings on redis://", redisconn.Config{TLS: redisconn.TLS{CAFile: f.CA}}, "redis://:" + secret + "@h:6379", "not rediss://"},
		{"cert without key", redisconn.Config{TLS: redisconn.TLS{CertFile: f.Cert}}, "rediss://h:6379", "set both"},
		{"empty password file", redisconn.Config{PasswordFile: os.DevNull}, "redis://h:6379", "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.Options(tc.url)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v: want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q contains the password", err)
			}
		})
	}
}

func TestOptionsTLSKeepsTheHostAsServerName(t *testing.T) {
	f := tlstest.Write(t)
	opts, err := redisconn.Config{TLS: redisconn.TLS{CAFile: f.CA, CertFile: f.Cert, KeyFile: f.Key}}.Options("rediss://redis.internal:6380/0")
	if err != nil {
		t.Fatal(err)
	}
	tc := opts.TLSConfig
	if tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "redis.internal" {
		t.Fatalf("tls config %+v: want the CA, the client certificate and server name redis.internal", tc)
	}
}
