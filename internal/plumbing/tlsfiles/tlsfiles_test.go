package tlsfiles_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/laneway/laneway/internal/plumbing/tlsfiles"
	"github.com/laneway/laneway/internal/plumbing/tlsfiles/tlstest"
)

func TestOffBuildsNothing(t *testing.T) {
	cfg, err := tlsfiles.Config{}.Build()
	if cfg != nil || err != nil {
		t.Fatalf("zero config: got %v, %v; want nil, nil", cfg, err)
	}
}

func TestBuildReadsTheFiles(t *testing.T) {
	f := tlstest.Write(t)
	cfg, err := tlsfiles.Config{CAFile: f.CA, CertFile: f.Cert, KeyFile: f.Key, ServerName: "kafka.internal"}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.ServerName != "kafka.internal" || cfg.InsecureSkipVerify {
		t.Fatalf("config %+v: want the CA pool, one client certificate, the server name, verification on", cfg)
	}
}

func TestEnabledAloneUsesSystemRoots(t *testing.T) {
	cfg, err := tlsfiles.Config{Enabled: true}.Build()
	if err != nil || cfg == nil || cfg.RootCAs != nil {
		t.Fatalf("got %+v, %v: want a config with the system roots (nil RootCAs)", cfg, err)
	}
}

func TestBadFilesAreRefusedWithTheirName(t *testing.T) {
	f := tlstest.Write(t)
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  tlsfiles.Config
		want string
	}{
		{"cert without key", tlsfiles.Config{CertFile: f.Cert}, "set both the cert file and the key file"},
		{"key without cert", tlsfiles.Config{KeyFile: f.Key}, "set both the cert file and the key file"},
		{"missing CA", tlsfiles.Config{CAFile: "/nonexistent/ca.pem"}, "CA file"},
		{"CA without certificates", tlsfiles.Config{CAFile: notPEM}, "no PEM certificate"},
		{"key that is a certificate", tlsfiles.Config{CertFile: f.Cert, KeyFile: f.CA}, "client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.Build()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v: want one containing %q", err, tc.want)
			}
		})
	}
}
