//go:build !unix

package connlimit

// DefaultTotal is a fixed cap where the file-descriptor limit cannot be
// read.
func DefaultTotal() int { return fallbackTotal }
