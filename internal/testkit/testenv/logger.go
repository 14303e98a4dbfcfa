package testenv

import (
	"log/slog"
	"os"
)

// Logger is the logger tests give what they start: silent, unless
// LANEWAY_TEST_LOG names a level (debug, info, warn, error), at which it
// writes text to stderr.
func Logger() *slog.Logger {
	level := os.Getenv("LANEWAY_TEST_LOG")
	if level == "" {
		return slog.New(slog.DiscardHandler)
	}
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}
