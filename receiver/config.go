package receiver

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults for Config.
const (
	// DefaultTolerance is the Standard Webhooks spec's five minutes: enough
	// for clock skew, short enough that a captured request cannot be
	// replayed for long.
	DefaultTolerance = 5 * time.Minute
	// DefaultMaxBodyBytes is four times Laneway's 256 KiB event limit, so a
	// genuine delivery always fits.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultDedupTTL matches Laneway's 72 h delivery age limit: no retry of
	// a delivery comes later than that.
	DefaultDedupTTL = 72 * time.Hour
	// DefaultClaimTTL outlasts Laneway's 5 s attempt timeout many times
	// over, and is short enough that a claim left by a crashed process
	// does not hold up Laneway's retries for long.
	DefaultClaimTTL = time.Minute
)

// Config configures a Verifier and a Handler. Only Secrets is required.
type Config struct {
	// Secrets are the endpoint's signing secrets ("whsec_…"), as Laneway
	// returned them. A delivery passes when it is signed with any of them.
	// Laneway signs with the old and the new secret while it rotates one
	// (24 h by default), so one secret is enough, and the receiver can
	// switch to the new one at any time during the overlap; list both to
	// switch without a gap. Required.
	Secrets []string

	// Tolerance is how far the webhook-timestamp header may be from Now,
	// in either direction. Laneway stamps every attempt when it is sent,
	// so retries pass. Default: DefaultTolerance (5 min).
	Tolerance time.Duration

	// Now is the clock timestamps are checked against, and the clock of
	// the default in-memory stores. Default: time.Now.
	Now func() time.Time

	// MaxBodyBytes is the largest body read. A larger one is answered 413,
	// which makes Laneway dead-letter the delivery instead of retrying it.
	// Default: DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64

	// Dedup remembers handled webhook-ids. Default: NewMemoryDedup with
	// its default bounds and Now, which only sees this process's requests.
	Dedup DedupStore

	// DedupTTL is how long a handled webhook-id is remembered.
	// Default: DefaultDedupTTL (72 h).
	DedupTTL time.Duration

	// ClaimTTL is how long an attempt in progress holds its webhook-id
	// against concurrent copies (answered 409). A claim is released as
	// soon as the application returns, so this only matters when the
	// process dies mid-call. Default: DefaultClaimTTL (1 min).
	ClaimTTL time.Duration

	// Revisions remembers the newest revision handled per entity.
	// Default: NewMemoryRevisions with its default bounds and Now.
	Revisions RevisionStore

	// Logger gets one line per rejected or failed request (info for
	// verification failures, error for application and store failures)
	// and a debug line per handled, duplicate or stale delivery.
	// Default: discards.
	Logger *slog.Logger
}

// errNoSecrets is returned by NewVerifier and NewHandler for an empty
// Config.Secrets.
const errNoSecrets = constError("receiver: Config.Secrets is empty")

func (c Config) withDefaults() (Config, error) {
	if len(c.Secrets) == 0 {
		return c, errNoSecrets
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Tolerance", c.Tolerance}, {"DedupTTL", c.DedupTTL}, {"ClaimTTL", c.ClaimTTL}} {
		if f.d < 0 {
			return c, fmt.Errorf("receiver: negative Config.%s %v", f.name, f.d)
		}
	}
	if c.MaxBodyBytes < 0 {
		return c, errors.New("receiver: negative Config.MaxBodyBytes")
	}
	c.Tolerance = orDefault(c.Tolerance, DefaultTolerance)
	c.DedupTTL = orDefault(c.DedupTTL, DefaultDedupTTL)
	c.ClaimTTL = orDefault(c.ClaimTTL, DefaultClaimTTL)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// withDefaultStores fills in the in-memory stores; only the Handler needs
// them, so a Verifier never allocates them.
func (c Config) withDefaultStores() Config {
	if c.Dedup == nil {
		c.Dedup = NewMemoryDedup(MemoryDedupConfig{Now: c.Now})
	}
	if c.Revisions == nil {
		c.Revisions = NewMemoryRevisions(MemoryRevisionsConfig{Now: c.Now})
	}
	return c
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
