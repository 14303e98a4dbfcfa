// Package redisconn turns Laneway's Redis settings (a redis:// or rediss://
// URL, CA and client certificates, an ACL user and password, possibly from
// a file) into go-redis options, and redacts the password from any URL
// Laneway prints, logs or puts in an error.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/plumbing/tlsfiles"
	"github.com/laneway/laneway/internal/plumbing/urlredact"
)

// DefaultKeyPrefix starts the Redis keys of Laneway's jobs and inbound
// dedup claims unless configured otherwise. Running deployments' keys
// start with it: do not change it.
const DefaultKeyPrefix = "laneway:"

// TLS names the CA bundle, client certificate and key of the connection.
type TLS = tlsfiles.Config

// Config is how Laneway connects to Redis, beyond what the URL says. Zero
// fields leave the URL's settings alone.
type Config struct {
	// Username is the ACL user; it overrides the URL's. Default: the URL's,
	// else Redis's "default" user.
	Username string
	// Password overrides the URL's; or PasswordFile (surrounding whitespace
	// dropped; read at start and again by each new connection, so a rotated
	// password is followed), never both. Prefer the file or the
	// variable to a password in the URL, which ends up in process listings.
	Password, PasswordFile string
	// TLS adds a CA bundle, a client certificate (mutual TLS) or a server
	// name to a rediss:// URL. It needs rediss://: a redis:// URL with TLS
	// settings is refused rather than silently sent in the clear.
	TLS TLS
}

// Options parses rawURL and applies c. Errors never contain the password.
func (c Config) Options(rawURL string) (*redis.Options, error) {
	if c.Password != "" && c.PasswordFile != "" {
		return nil, errors.New("redis: the password is given twice, inline and by file: keep one")
	}
	if err := c.TLS.Validate(); err != nil {
		return nil, fmt.Errorf("redis tls: %w", err)
	}
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis url %s: %s", Redact(rawURL), scrub(err.Error(), rawURL))
	}
	if err := c.applyTLS(opts, rawURL); err != nil {
		return nil, err
	}
	if c.Username != "" {
		opts.Username = c.Username
	}
	if c.Password != "" {
		opts.Password = c.Password
	}
	if c.PasswordFile != "" {
		if opts.Password, err = readPassword(c.PasswordFile); err != nil {
			return nil, err
		}
		// Each new connection reads the file again, so a rotated password
		// is picked up without a restart.
		user, file := opts.Username, c.PasswordFile
		opts.CredentialsProviderContext = func(context.Context) (string, string, error) {
			p, err := readPassword(file)
			return user, p, err
		}
	}
	return opts, nil
}

// applyTLS adds the files to the TLS config rediss:// set up, keeping the
// server name go-redis derived from the host unless one is given.
func (c Config) applyTLS(opts *redis.Options, rawURL string) error {
	if !c.TLS.On() {
		return nil
	}
	if opts.TLSConfig == nil {
		return fmt.Errorf("redis: TLS settings are given but the URL %s is not rediss://: use rediss:// so the connection is encrypted", Redact(rawURL))
	}
	if c.TLS == (TLS{Enabled: true}) {
		return nil // rediss:// has done it
	}
	built, err := c.TLS.Build()
	if err != nil {
		return fmt.Errorf("redis tls: %w", err)
	}
	if built.ServerName == "" {
		built.ServerName = opts.TLSConfig.ServerName
	}
	opts.TLSConfig = built
	return nil
}

func readPassword(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("redis password file: %w", err)
	}
	p := strings.TrimSpace(string(b))
	if p == "" {
		return "", fmt.Errorf("redis password file %s is empty", file)
	}
	return p, nil
}

// Redact returns rawURL with its password replaced by "xxxxx", for printing
// and logging. A URL that does not parse as scheme://[user[:password]@]host
// is reduced to its scheme, since where a password sits in it is unknown.
// A typo that parses with the credentials outside the user info
// ("rediss//u:pw@host", "redis:/u:pw@host": a path) is masked on its text.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Opaque != "" {
		scheme, _, ok := strings.Cut(rawURL, "://")
		if !ok {
			return "(unparsable redis url)"
		}
		return scheme + "://(unparsable)"
	}
	if u.User == nil && strings.Contains(rawURL, "@") {
		masked, _ := urlredact.Userinfo(rawURL)
		return masked
	}
	// go-redis also reads a password from the query (?password=...).
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// scrub removes rawURL and its password from msg (url.Parse errors quote
// the whole URL, go-redis's may quote its path), wherever the password sits.
func scrub(msg, rawURL string) string {
	msg = urlredact.Scrub(strings.ReplaceAll(msg, rawURL, Redact(rawURL)), rawURL)
	if u, err := url.Parse(rawURL); err == nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}
