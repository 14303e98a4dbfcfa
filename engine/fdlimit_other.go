//go:build !unix

package engine

// DefaultMaxInFlight is a fixed cap where the file-descriptor limit cannot
// be read.
func DefaultMaxInFlight() int { return fallbackMaxInFlight }
