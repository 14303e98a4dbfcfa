package deliver_test

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/security/ssrf"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want deliver.Outcome
	}{
		{"nil", nil, deliver.Delivered},
		{"410", &deliver.StatusError{Code: 410}, deliver.Gone},
		{"410 wrapped", fmt.Errorf("attempt 3: %w", &deliver.StatusError{Code: 410}), deliver.Gone},
		{"413", &deliver.StatusError{Code: 413, Body: "too big"}, deliver.Dead},
		{"400", &deliver.StatusError{Code: 400}, deliver.Retry},
		{"404", &deliver.StatusError{Code: 404}, deliver.Retry},
		{"429", &deliver.StatusError{Code: 429}, deliver.Retry},
		{"500", &deliver.StatusError{Code: 500}, deliver.Retry},
		{"503", &deliver.StatusError{Code: 503}, deliver.Retry},
		{"redirect", &deliver.RedirectError{Code: 301, Location: "/x"}, deliver.Retry},
		{"timeout", &deliver.TimeoutError{}, deliver.Retry},
		{"transport", &deliver.TransportError{Err: errors.New("connection reset")}, deliver.Retry},
		{"blocked", &ssrf.BlockedError{Addr: netip.MustParseAddr("10.0.0.1"), Reason: "private"}, deliver.Retry},
		{"bad request", &deliver.RequestError{Reason: "invalid URL"}, deliver.Retry},
		{"unsendable message", &deliver.MessageError{Reason: "message id holds control characters"}, deliver.Dead},
		{"unsendable message wrapped", fmt.Errorf("attempt 1: %w", &deliver.MessageError{Reason: "no message id"}), deliver.Dead},
		{"canceled", &deliver.CanceledError{Cause: errors.New("shutdown")}, deliver.Canceled},
		{"unknown", errors.New("something else"), deliver.Retry},
	}
	for _, tc := range tests {
		if got := deliver.Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOutcomeLabels(t *testing.T) {
	labels := map[deliver.Outcome]string{
		deliver.Delivered: "delivered",
		deliver.Retry:     "retry",
		deliver.Dead:      "dead",
		deliver.Gone:      "gone",
	}
	for o, want := range labels {
		if o.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(o), o.String(), want)
		}
	}
	var zero deliver.Outcome
	if _, clash := labels[zero]; clash {
		t.Error("the zero Outcome is a valid outcome; a forgotten assignment would read as one")
	}
}

func TestErrorMessages(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&deliver.StatusError{Code: 503, Body: "down for maintenance"}, "deliver: HTTP 503 Service Unavailable: down for maintenance"},
		{&deliver.StatusError{Code: 599}, "deliver: HTTP 599"},
		{&deliver.RedirectError{Code: 301, Location: "https://new.example/hook"}, "deliver: HTTP 301 Moved Permanently (redirects are not followed) to https://new.example/hook"},
		{&deliver.TimeoutError{After: 5e9}, "deliver: no response within 5s"},
		{&deliver.TransportError{Err: errors.New("connection refused")}, "deliver: connection refused"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
