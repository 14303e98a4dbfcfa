package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
)

// logCapture keeps every record a logger it made was given, so a test can
// assert on what a started app logged. It is safe for the goroutines the
// app logs from.
type logCapture struct {
	mu    sync.Mutex
	lines []logLine
}

// logLine is one captured record: its level, message and attributes
// (formatted with %v).
type logLine struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

func (l logLine) String() string {
	keys := slices.Sorted(maps.Keys(l.Attrs))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", l.Level, l.Msg)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, l.Attrs[k])
	}
	return b.String()
}

// logger returns a logger, at debug level, that records into l.
func (l *logCapture) logger() *slog.Logger { return slog.New(&captureHandler{to: l}) }

// at returns the lines logged at level or above.
func (l *logCapture) at(level slog.Level) []logLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logLine
	for _, line := range l.lines {
		if line.Level >= level {
			out = append(out, line)
		}
	}
	return out
}

// matching returns the lines at level whose message contains substr.
func (l *logCapture) matching(level slog.Level, substr string) []logLine {
	var out []logLine
	for _, line := range l.at(level) {
		if line.Level == level && strings.Contains(line.Msg, substr) {
			out = append(out, line)
		}
	}
	return out
}

// captureHandler is logCapture's slog.Handler; groups are flattened into
// dotted attribute keys.
type captureHandler struct {
	to     *logCapture
	attrs  []slog.Attr
	prefix string
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	line := logLine{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		line.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		line.Attrs[h.prefix+a.Key] = a.Value.String()
		return true
	})
	h.to.mu.Lock()
	defer h.to.mu.Unlock()
	h.to.lines = append(h.to.lines, line)
	return nil
}

func (h *captureHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	next := *h
	next.attrs = slices.Clone(h.attrs)
	for _, a := range attrs {
		next.attrs = append(next.attrs, slog.Attr{Key: h.prefix + a.Key, Value: a.Value})
	}
	return &next
}

func (h *captureHandler) WithGroup(name string) slog.Handler {
	next := *h
	next.prefix = h.prefix + name + "."
	return &next
}
