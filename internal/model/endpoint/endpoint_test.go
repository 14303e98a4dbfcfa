package endpoint

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func valid() Endpoint {
	return Endpoint{ID: "ep_1", Tenant: "acme", URL: "https://hooks.example.com/x", MaxConcurrency: 4,
		Status: StatusActive, Secrets: []Secret{{Value: NewSecret()}}}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Endpoint)
		field  string
	}{
		{"ok", func(*Endpoint) {}, ""},
		{"no tenant", func(e *Endpoint) { e.Tenant = " " }, "tenant"},
		{"ftp scheme", func(e *Endpoint) { e.URL = "ftp://example.com" }, "url"},
		{"relative url", func(e *Endpoint) { e.URL = "/hooks" }, "url"},
		{"no host", func(e *Endpoint) { e.URL = "https://" }, "url"},
		{"credentials", func(e *Endpoint) { e.URL = "https://u:p@example.com" }, "url"},
		{"concurrency 0", func(e *Endpoint) { e.MaxConcurrency = 0 }, "max_concurrency"},
		{"concurrency 1001", func(e *Endpoint) { e.MaxConcurrency = 1001 }, "max_concurrency"},
		{"concurrency 1000", func(e *Endpoint) { e.MaxConcurrency = 1000 }, ""},
		{"empty type", func(e *Endpoint) { e.EventTypes = []string{""} }, "event_types"},
		{"bad secret prefix", func(e *Endpoint) { e.Secrets = []Secret{{Value: "abc"}} }, "secret"},
		{"short secret", func(e *Endpoint) { e.Secrets = []Secret{{Value: "whsec_YWJj"}} }, "secret"},
		{"bad status", func(e *Endpoint) { e.Status = "sleepy" }, "status"},
		{"unknown mode", func(e *Endpoint) { e.Mode = "stream" }, "mode"},
		{"batch", func(e *Endpoint) { e.Mode, e.Batch = ModeBatch, &BatchConfig{MaxEvents: 1000, MaxWaitMS: 1} }, ""},
		{"batch without url", func(e *Endpoint) { e.Mode, e.URL = ModeBatch, "" }, "url"},
		{"batch of 1001", func(e *Endpoint) { e.Mode, e.Batch = ModeBatch, &BatchConfig{MaxEvents: 1001} }, "batch.max_events"},
		{"batch of 10 bytes", func(e *Endpoint) { e.Mode, e.Batch = ModeBatch, &BatchConfig{MaxBytes: 10} }, "batch.max_bytes"},
		{"batch waits 2 minutes", func(e *Endpoint) { e.Mode, e.Batch = ModeBatch, &BatchConfig{MaxWaitMS: 120_000} }, "batch.max_wait_ms"},
		{"batch settings on a push endpoint", func(e *Endpoint) { e.Batch = &BatchConfig{} }, "batch"},
		{"push without url", func(e *Endpoint) { e.Mode, e.URL = ModePush, "" }, "url"},
		{"pull without url", func(e *Endpoint) { e.Mode, e.URL = ModePull, "" }, ""},
		{"pull with url", func(e *Endpoint) { e.Mode = ModePull }, "url"},
		{"pull token without hash", func(e *Endpoint) {
			e.Mode, e.URL, e.FeedTokens = ModePull, "", []FeedToken{{ID: "ft_1"}}
		}, "feed_tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := valid()
			c.mutate(&e)
			err := e.Validate()
			var ve *ValidationError
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case c.field != "" && (!errors.As(err, &ve) || ve.Field != c.field):
				t.Fatalf("error %v, want a %s validation error", err, c.field)
			}
		})
	}
}

func TestSubscribes(t *testing.T) {
	e := valid()
	if !e.Subscribes("acme", "anything") {
		t.Error("empty event_types must match every type")
	}
	e.EventTypes = []string{"order.updated"}
	if !e.Subscribes("acme", "order.updated") || e.Subscribes("acme", "payment.approved") || e.Subscribes("other", "order.updated") {
		t.Error("type or tenant filter wrong")
	}
	e.Status = StatusDisabled
	if e.Subscribes("acme", "order.updated") {
		t.Error("a disabled endpoint must not subscribe")
	}
}

func TestSigningSecretsDropExpired(t *testing.T) {
	now := time.Now()
	e := Endpoint{Secrets: []Secret{{Value: "new"}, {Value: "old", ExpiresAt: now.Add(time.Hour)}, {Value: "gone", ExpiresAt: now.Add(-time.Second)}}}
	if got := strings.Join(e.SigningSecrets(now), ","); got != "new,old" {
		t.Errorf("secrets = %s", got)
	}
}

func TestNewSecretIsValidAndRandom(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	if err := ValidateSecret(a); err != nil || a == b {
		t.Fatalf("NewSecret: %v (%s vs %s)", err, a, b)
	}
}

func TestFeedTokenValid(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	e := Endpoint{ID: "ep_1", Mode: ModePull}
	token, stored := NewFeedToken("ft_1", now)
	old, oldStored := NewFeedToken("ft_0", now)
	oldStored.ExpiresAt = now.Add(time.Hour)
	e.FeedTokens = []FeedToken{oldStored, stored}
	if !strings.HasPrefix(token, FeedTokenPrefix) || strings.Contains(stored.Hash, token) {
		t.Fatalf("token %q stored as %+v", token, stored)
	}
	for _, c := range []struct {
		name  string
		token string
		at    time.Time
		want  bool
	}{
		{"current", token, now, true},
		{"rotated out, within its overlap", old, now.Add(59 * time.Minute), true},
		{"rotated out, overlap over", old, now.Add(time.Hour), false},
		{"altered", token[:len(token)-1] + "x", now, false},
		{"no prefix", strings.TrimPrefix(token, FeedTokenPrefix), now, false},
		{"empty", "", now, false},
	} {
		if got := e.FeedTokenValid(c.token, c.at); got != c.want {
			t.Errorf("%s: valid = %v, want %v", c.name, got, c.want)
		}
	}
	push := e
	push.Mode = ModePush
	if push.FeedTokenValid(token, now) {
		t.Error("a push endpoint's stored token opened a feed")
	}
}

// A URL whose path or query a request line cannot carry as written is
// refused, with a reason that says what to do; one the sender would send
// as written is accepted.
func TestValidateURLRefusesWhatARequestLineCannotCarry(t *testing.T) {
	cases := []struct {
		name, url string
		reason    string // a part of the reason; "" accepts the URL
	}{
		{"space in the path", "https://example.com/in box", "spaces"},
		{"space in the query", "https://example.com/hook?q=a b", "spaces"},
		{"tab", "https://example.com/hook?q=a\tb", "control"},
		{"line feed", "https://example.com/hook?q=a\nX-Injected: 1", "control"},
		{"DEL", "https://example.com/hook?q=\x7f", "control"},
		{"non-ASCII in the path", "https://example.com/é", "non-ASCII"},
		{"non-ASCII in the query", "https://example.com/hook?q=é", "non-ASCII"},
		{"non-ASCII host", "https://bücher.example/hook", "punycode"},
		{"braces and bar in the query", "https://example.com/hook?q={a}|b", "percent-encode"},
		{"brackets in the query", "https://example.com/hook?a[]=1", "percent-encode"},
		{"quote in the path", `https://example.com/"hook"`, "percent-encode"},
		{"a % that starts no escape", "https://example.com/hook?q=100%", "%25"},
		{"escaped", "https://example.com/in%20box/%C3%A9?q=a%20b&r=%7Ba%7D", ""},
		{"punycode host", "https://xn--bcher-kva.example/hook", ""},
		{"sub-delims and colons", "https://example.com/a;b=c/d:e@f?g=h+i&j=!$'()*,~/?", ""},
		{"IPv6 host", "https://[2001:db8::1]:8443/hook", ""},
		{"fragment", "https://example.com/hook#part", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateURL(c.url)
			if c.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != "url" || !strings.Contains(ve.Reason, c.reason) {
				t.Fatalf("error %v, want a url validation error about %q", err, c.reason)
			}
			if strings.Contains(ve.Error(), "example") {
				t.Errorf("error %q quotes the URL", ve.Error())
			}
		})
	}
}
