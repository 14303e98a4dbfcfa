// Package connlimit caps the connections a listener holds, per client
// address and in all, so that one client cannot take every file descriptor
// of the process with idle sockets: a connection over a cap is closed as
// soon as it is accepted, and counted.
package connlimit

import "github.com/laneway/laneway/internal/plumbing/valutil"

// DefaultPerAddress is Limits.PerAddress's default.
const DefaultPerAddress = 64

// minTotal is the least default Total; fallbackTotal the default where the
// file-descriptor limit cannot be read.
const (
	minTotal      = 64
	fallbackTotal = 256
)

// Limits are one listener's caps. Zero values take the defaults documented
// on each field.
type Limits struct {
	// Total caps the listener's open connections. Default DefaultTotal():
	// an eighth of the process's file-descriptor limit, so that a
	// listener can only exhaust its own share and leaves the rest to
	// deliveries (half: engine.DefaultMaxInFlight), Kafka, Redis and the
	// other listener.
	Total int
	// PerAddress caps the open connections from one client address (IPv6:
	// one /64). Default DefaultPerAddress (64).
	PerAddress int
}

// WithDefaults fills in the zero fields.
func (l Limits) WithDefaults() Limits {
	l.Total = valutil.PositiveOr(l.Total, DefaultTotal())
	l.PerAddress = valutil.PositiveOr(l.PerAddress, DefaultPerAddress)
	return l
}
