package testenv

import (
	"context"
	"testing"
)

// Start starts a component with the test's context, failing the test if it
// cannot, and stops it when the test ends (StopOnCleanup).
func Start(t testing.TB, start, stop func(context.Context) error) {
	t.Helper()
	if err := start(t.Context()); err != nil {
		t.Fatal(err)
	}
	StopOnCleanup(t, stop)
}

// StopOnCleanup stops a component when the test ends, failing the test if
// Stop fails. It stops with a fresh context: t.Context() is already canceled
// when cleanups run.
func StopOnCleanup(t testing.TB, stop func(context.Context) error) {
	t.Cleanup(func() { Stop(t, stop) })
}

// Stop stops a component now, failing the test if Stop fails. It reports
// with t.Error, so it may be called from any goroutine.
func Stop(t testing.TB, stop func(context.Context) error) {
	t.Helper()
	if err := stop(context.Background()); err != nil {
		t.Error(err)
	}
}
