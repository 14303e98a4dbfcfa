// Package tlsfiles builds a client *tls.Config from the files operators are
// handed (a CA bundle, a client certificate and key), so the Kafka and Redis
// connections read and check them the same way.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Config names the files of a TLS client. The zero value is "TLS off"; any
// field set turns TLS on (see Enabled).
type Config struct {
	// Enabled turns TLS on with the system's CA roots, for clusters whose
	// certificates a public CA signed (MSK, Confluent Cloud). Setting any
	// other field implies it. Default false.
	Enabled bool
	// CAFile is a PEM bundle of the CAs that sign the server's certificate.
	// Empty: the system roots.
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and its key, for
	// mutual TLS. Both or neither. Default: no client certificate.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must carry. Empty: the
	// host dialled.
	ServerName string
	// InsecureSkipVerify accepts any server certificate. For tests only: it
	// lets anyone on the path read and change the traffic. Default false.
	InsecureSkipVerify bool
}

// On reports whether TLS is wanted: Enabled, or any file or option set.
func (c Config) On() bool {
	return c.Enabled || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" || c.InsecureSkipVerify
}

// Validate checks the combination without reading the files.
func (c Config) Validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("a client certificate and its key go together: set both the cert file and the key file, or neither")
	}
	return nil
}

// Build reads the files and returns the client config, or nil when TLS is
// off. Errors name the file at fault.
func (c Config) Build() (*tls.Config, error) {
	if !c.On() {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and key %s: %w", c.CertFile, c.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
