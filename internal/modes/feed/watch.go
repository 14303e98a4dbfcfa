package feed

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// DefaultPollInterval is how often a Watcher asks the brokers for the end
// of the feeds someone waits on.
const DefaultPollInterval = 100 * time.Millisecond

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	// Admin lists the feeds' end offsets. Required.
	Admin *kadm.Client
	// PollInterval is how often the ends of waited-on feeds are listed.
	// Default: DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives failed polls. Default: slog.Default().
	Logger *slog.Logger
}

// Watcher lets long polls wait for a feed to grow. A broker's own long
// poll (a Fetch's max wait) would hold a connection that requests to that
// broker queue behind, so waiting is done here instead: one ListOffsets
// request per interval for every feed waited on, however many consumers
// wait, and at once for appends made by this instance (Appended).
type Watcher struct {
	cfg WatcherConfig

	mu      sync.Mutex
	waiters map[string][]*waiter // by topic

	stop chan struct{}
	done chan struct{}
}

type waiter struct {
	from  int64
	ready chan struct{}
}

// NewWatcher returns a Watcher; Start runs its poll loop.
func NewWatcher(cfg WatcherConfig) *Watcher {
	cfg.PollInterval = valutil.PositiveOr(cfg.PollInterval, DefaultPollInterval)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Watcher{cfg: cfg, waiters: map[string][]*waiter{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start runs the poll loop until Stop (ctx is not its lifetime, nor used
// otherwise). It cannot fail.
func (w *Watcher) Start(context.Context) error {
	go w.loop()
	return nil
}

// Stop ends the poll loop and waits for it; ctx is not used. Waits in
// progress end with their context. It returns nil.
func (w *Watcher) Stop(context.Context) error {
	close(w.stop)
	<-w.done
	return nil
}

// Wait returns true once topic has an event at or after from, false when
// ctx ends first.
func (w *Watcher) Wait(ctx context.Context, topic string, from int64) bool {
	wt := &waiter{from: from, ready: make(chan struct{})}
	w.mu.Lock()
	w.waiters[topic] = append(w.waiters[topic], wt)
	w.mu.Unlock()
	defer w.forget(topic, wt)
	select {
	case <-wt.ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// Appended wakes the waits on topic that end now satisfies.
func (w *Watcher) Appended(topic string, end int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kept := w.waiters[topic][:0]
	for _, wt := range w.waiters[topic] {
		if end > wt.from {
			close(wt.ready)
		} else {
			kept = append(kept, wt)
		}
	}
	if len(kept) == 0 {
		delete(w.waiters, topic)
	} else {
		w.waiters[topic] = kept
	}
}

func (w *Watcher) forget(topic string, wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.waiters[topic]
	for i, x := range ws {
		if x == wt {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(w.waiters, topic)
	} else {
		w.waiters[topic] = ws
	}
}

func (w *Watcher) loop() {
	defer close(w.done)
	timing.Every(w.stop, w.cfg.PollInterval, w.poll)
}

// poll lists the ends of every waited-on feed and wakes whom they satisfy.
func (w *Watcher) poll() {
	w.mu.Lock()
	waited := make([]string, 0, len(w.waiters))
	for t := range w.waiters {
		waited = append(waited, t)
	}
	w.mu.Unlock()
	if len(waited) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*w.cfg.PollInterval+time.Second)
	defer cancel()
	ends, err := w.cfg.Admin.ListEndOffsets(ctx, waited...)
	if err != nil {
		w.cfg.Logger.Warn("feed: listing the ends of waited-on feeds failed", "err", err)
		return
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Partition == 0 {
			w.Appended(o.Topic, o.Offset)
		}
	})
}
