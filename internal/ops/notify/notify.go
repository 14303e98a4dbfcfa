// Package notify tells the operators about what needs a human, today an
// endpoint that Laneway disabled by itself (410 Gone, or failing for the
// disable threshold). Each notification is a log line and, when an operator
// webhook is configured, a POST signed the Standard Webhooks way, so the
// operators' own receiver can verify it with the same libraries customers use.
//
// Notifications are sent in the background with a few retries; a full queue
// or an unreachable operator endpoint loses the webhook, never the log line,
// and never blocks delivery.
package notify

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
	"github.com/laneway/laneway/signing"
)

// TypeEndpointDisabled is the type of the notification sent on a disable.
const TypeEndpointDisabled = "endpoint.disabled"

// Config configures a Notifier.
type Config struct {
	// URL is the operator webhook. Empty: notifications are only logged.
	// It is operator-controlled config, so the outbound SSRF guard does
	// not apply to it (it may well be an internal address).
	URL string
	// Secret signs the webhook (whsec_...). Required with URL.
	Secret string
	// InstanceID names the sending instance in the payload.
	InstanceID string
	// Client sends the webhook. Default: an http.Client with a 10s timeout
	// that follows no redirects.
	Client *http.Client
	// Attempts per notification. Default 5.
	Attempts int
	// Backoff is the delay before the second attempt; it doubles after
	// each failure. Default 1s.
	Backoff time.Duration
	// QueueSize bounds the notifications waiting to be sent. Default 1000.
	QueueSize int
	// Logger receives the notification log lines. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() error {
	if c.URL != "" {
		if err := endpoint.ValidateSecret(c.Secret); err != nil {
			return fmt.Errorf("operator webhook secret: %w", err)
		}
	}
	if c.Client == nil {
		c.Client = &http.Client{
			Timeout:       10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	c.Attempts = valutil.PositiveOr(c.Attempts, 5)
	c.Backoff = valutil.PositiveOr(c.Backoff, time.Second)
	c.QueueSize = valutil.PositiveOr(c.QueueSize, 1000)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Now = timing.Clock(c.Now)
	return nil
}

// Notification is the webhook body.
type Notification struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// Disabled is the data of an endpoint.disabled notification.
type Disabled struct {
	EndpointID string    `json:"endpoint_id"`
	Tenant     string    `json:"tenant"`
	URL        string    `json:"url"`
	Reason     string    `json:"reason"`
	DisabledAt time.Time `json:"disabled_at"`
	Instance   string    `json:"instance,omitempty"`
}

// Notifier sends notifications. Start it before use and Stop it to drain.
type Notifier struct {
	cfg    Config
	queue  chan Notification
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stop   sync.Once

	mu     sync.Mutex // guards closed against enqueue
	closed bool
}

// New checks cfg and returns a Notifier.
func New(cfg Config) (*Notifier, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Notifier{cfg: cfg, queue: make(chan Notification, cfg.QueueSize), ctx: ctx, cancel: cancel}, nil
}

// Start runs the sender until Stop (ctx is not its lifetime, nor used
// otherwise). It cannot fail.
func (n *Notifier) Start(context.Context) error {
	n.wg.Add(1)
	go n.sendLoop()
	return nil
}

// Stop sends what is queued, waiting at most until ctx ends, then gives up
// on the rest (they are logged already), cancels the send in progress and
// waits for the sender to return. It returns ctx.Err() if ctx ended before
// the sender was done, nil otherwise (and on calls after the first).
func (n *Notifier) Stop(ctx context.Context) error {
	var err error
	n.stop.Do(func() { err = n.drain(ctx) })
	return err
}

func (n *Notifier) drain(ctx context.Context) error {
	n.mu.Lock()
	n.closed = true
	close(n.queue)
	n.mu.Unlock()
	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		select {
		case <-done: // done too: nothing was given up
		default:
			err = ctx.Err()
			n.cancel()
			<-done
		}
	}
	n.cancel()
	return err
}

// EndpointDisabled logs the disable and queues the operator webhook.
func (n *Notifier) EndpointDisabled(ep endpoint.Endpoint, reason string) {
	now := n.cfg.Now().UTC()
	n.cfg.Logger.Warn("operator notification: endpoint disabled", "endpoint", ep.ID, "tenant", ep.Tenant,
		"reason", reason, "instance", n.cfg.InstanceID)
	data, _ := json.Marshal(Disabled{ // plain struct always encodes
		EndpointID: ep.ID, Tenant: ep.Tenant, URL: ep.URL, Reason: reason, DisabledAt: now, Instance: n.cfg.InstanceID,
	})
	n.enqueue(Notification{ID: "ntf_" + uuid.NewString(), Type: TypeEndpointDisabled, Timestamp: now, Data: data})
}

func (n *Notifier) enqueue(msg Notification) {
	if n.cfg.URL == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		n.cfg.Logger.Error("operator notification dropped: shutting down", "id", msg.ID, "type", msg.Type)
		return
	}
	select {
	case n.queue <- msg:
	default:
		n.cfg.Logger.Error("operator notification dropped: queue full", "id", msg.ID, "type", msg.Type)
	}
}

func (n *Notifier) sendLoop() {
	defer n.wg.Done()
	for msg := range n.queue {
		if err := n.sendWithRetries(msg); err != nil {
			n.cfg.Logger.Error("operator notification not delivered", "id", msg.ID, "type", msg.Type, "err", err)
		}
	}
}

func (n *Notifier) sendWithRetries(msg Notification) error {
	body, _ := json.Marshal(msg) // plain struct always encodes
	delay := n.cfg.Backoff
	var err error
	for attempt := 1; attempt <= n.cfg.Attempts; attempt++ {
		if err = n.send(msg.ID, body); err == nil {
			return nil
		}
		if attempt == n.cfg.Attempts {
			break
		}
		if !timing.Sleep(n.ctx, delay) {
			return fmt.Errorf("stopped: %w", err)
		}
		delay *= 2
	}
	return err
}

// StatusError is a non-2xx answer from the operator webhook.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("operator webhook answered %d", e.Code) }

func (n *Notifier) send(id string, body []byte) error {
	headers, err := signing.Headers(id, n.cfg.Now(), body, []string{n.cfg.Secret})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(n.ctx, http.MethodPost, n.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = headers
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{resp.StatusCode}
	}
	return nil
}
