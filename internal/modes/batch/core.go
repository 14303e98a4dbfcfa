// Package batch delivers the events of batch endpoints: in the order of
// the endpoint's feed, as signed POSTs of {"batch":[…]}, one batch at a
// time, the next only after the previous one succeeded or its events
// were dead-lettered.
//
// A batch endpoint's deliveries are appended to its feed topic by the
// delivery stage, exactly as a pull endpoint's (per entity in order, under
// the lanes, retries and parking of any endpoint). The owner of the
// endpoint's deliveries partition also runs the endpoint's Runner, which
// reads the feed from a committed cursor and sends it in batches: so the
// backlog of a slow batch endpoint waits in Kafka, never in memory, and
// the order of the whole endpoint is the feed's.
//
// Core decides (pure and deterministic: no goroutine, no clock, no I/O);
// Runner performs (Kafka, HTTP, the breaker) and feeds Core the outcomes.
package batch

import (
	"time"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/event"
)

// Event is one event of the feed, read and ready to batch.
type Event struct {
	// Offset is its offset in the feed topic.
	Offset int64
	// Sequence is what the receiver sees: Offset+1, or the sequence a
	// redriven dead letter kept.
	Sequence int64
	// AppendedAt is when it reached the feed: a batch that is not full
	// waits MaxWait from its first event's.
	AppendedAt time.Time
	Delivery   *event.Delivery
	// Item is the event as the batch shows it, sequence first.
	Item []byte
}

// Limits size a batch (endpoint.BatchConfig.Sizes).
type Limits struct {
	MaxEvents, MaxBytes int
	MaxWait             time.Duration
}

// bodyOverhead is {"batch":[ and ]}.
const bodyOverhead = len(`{"batch":[]}`)

// Core is the decision state of one batch endpoint's runner.
type Core struct {
	retry deliver.RetryPolicy
	rand  func() float64

	window []Event // read and not finished, in offset order
	bytes  int     // of the window's items
	readTo int64   // the next offset to read

	sent      int // events of the batch in flight; 0: none
	attempts  int // failed attempts of the batch at the window's head
	failed    int // that batch's size: its retries carry the same events
	notBefore time.Time

	// After a 413 the batches that cover the refused one are at most
	// splitCap events, until splitUntil is passed.
	splitCap   int
	splitUntil int64
}

// NewCore starts at the committed cursor from.
func NewCore(from int64, retry deliver.RetryPolicy, rand func() float64) *Core {
	return &Core{retry: retry, rand: rand, readTo: from}
}

// Cursor is the first offset not finished: what to commit.
func (c *Core) Cursor() int64 {
	if len(c.window) > 0 {
		return c.window[0].Offset
	}
	return c.readTo
}

// ReadFrom is the next offset to read.
func (c *Core) ReadFrom() int64 { return c.readTo }

// WantsMore reports whether the window has room: it holds at most two
// batches (in events and in bytes), so memory is bounded whatever the
// backlog.
func (c *Core) WantsMore(l Limits) bool {
	return len(c.window) < 2*l.MaxEvents && c.bytes < 2*l.MaxBytes
}

// Add appends events read from ReadFrom; next is where reading goes on.
func (c *Core) Add(evs []Event, next int64) {
	c.window = append(c.window, evs...)
	for _, e := range evs {
		c.bytes += len(e.Item)
	}
	c.readTo = max(c.readTo, next)
}

// InFlight reports whether a batch is out.
func (c *Core) InFlight() bool { return c.sent > 0 }

// Pending is the events read and not finished.
func (c *Core) Pending() []Event { return c.window }

// Next returns the batch to send at now, or, when none, the time to look
// again (zero: when more events are read, or an outcome arrives).
// caughtUp says nothing more is readable now: only then does a batch that
// is not full wait for MaxWait.
func (c *Core) Next(now time.Time, l Limits, caughtUp bool) ([]Event, time.Time) {
	if c.sent > 0 || len(c.window) == 0 {
		return nil, time.Time{}
	}
	if now.Before(c.notBefore) {
		return nil, c.notBefore
	}
	n, full := c.take(l)
	if !full && c.attempts == 0 {
		switch due := c.window[0].AppendedAt.Add(l.MaxWait); {
		case !caughtUp && c.WantsMore(l):
			return nil, time.Time{} // read more first
		case caughtUp && now.Before(due):
			return nil, due
		}
	}
	c.sent = n
	return c.window[:n], time.Time{}
}

// take counts the events of the next batch and reports whether a limit,
// rather than the window's end, ended it.
func (c *Core) take(l Limits) (n int, full bool) {
	most := l.MaxEvents
	if c.splitCap > 0 && c.window[0].Offset < c.splitUntil {
		most = min(most, c.splitCap)
	}
	if c.attempts > 0 {
		// A retry is the failed batch, whole and alone: events that
		// arrived since wait for the next batch, so the retry keeps its
		// webhook-id and the receiver can drop it if it took it already.
		most = min(most, c.failed)
	}
	size := bodyOverhead
	for n < len(c.window) {
		if n == most {
			return n, true
		}
		add := len(c.window[n].Item) + 1
		if n > 0 && size+add > l.MaxBytes {
			return n, true
		}
		size += add
		n++
	}
	return n, n == most
}

// Result is what an outcome asks of the runner, in this order: write the
// dead letters, disable the endpoint if asked, then commit Cursor.
type Result struct {
	Delivered []Event
	Dead      []Event
	Reason    string // the dead letters' reason
	Disable   bool   // the endpoint answered 410 Gone
	// Attempts is how many attempts the dead events had, for their letters.
	Attempts int
}

// Done applies the outcome of the batch in flight.
func (c *Core) Done(o deliver.Outcome, retryAfter time.Duration, now time.Time) Result {
	n := c.sent
	c.sent = 0
	if n == 0 {
		return Result{}
	}
	switch o {
	case deliver.Delivered:
		return Result{Delivered: c.pop(n)}
	case deliver.Gone:
		tried := c.attempts + 1
		return Result{Dead: c.pop(n), Reason: event.ReasonGone, Disable: true, Attempts: tried}
	case deliver.Dead:
		return c.tooLarge(n)
	case deliver.Canceled:
		return Result{} // abandoned at a release: the next owner sends it
	}
	c.attempts, c.failed = c.attempts+1, n
	if reason, dead := c.retry.Exhausted(c.attempts, c.oldestCreated(n), now); dead {
		tried := c.attempts
		return Result{Dead: c.pop(n), Reason: reason, Attempts: tried}
	}
	c.notBefore = now.Add(c.retry.Delay(c.attempts, retryAfter, c.rand))
	return Result{}
}

// tooLarge splits a refused batch in halves, down to one event, which is
// dead. A split is not a failure of the endpoint: the halves go at once.
func (c *Core) tooLarge(n int) Result {
	if n == 1 {
		tried := c.attempts + 1
		return Result{Dead: c.pop(1), Reason: event.ReasonTooLarge, Attempts: tried}
	}
	c.splitCap = (n + 1) / 2
	c.splitUntil = max(c.splitUntil, c.window[n-1].Offset+1)
	return Result{}
}

// Expire ends as dead letters the events at the window's head that are
// past the retry policy's maximum age, as the partition owner does for a
// paused endpoint's parked deliveries: a pause never outlives max_age, so
// the feed's retention (longer, checkRetention) never drops an event
// without its dead letter.
func (c *Core) Expire(now time.Time) Result {
	if c.sent > 0 {
		return Result{}
	}
	n := 0
	reason := ""
	for n < len(c.window) {
		r, dead := c.retry.Exhausted(0, c.window[n].Delivery.CreatedAt, now)
		if !dead {
			break
		}
		reason = r
		n++
	}
	if n == 0 {
		return Result{}
	}
	tried := c.attempts
	return Result{Dead: c.pop(n), Reason: reason, Attempts: tried}
}

// Drain ends every event read as a dead letter with reason: the endpoint
// was disabled or deleted.
func (c *Core) Drain(reason string) Result {
	if c.sent > 0 || len(c.window) == 0 {
		return Result{}
	}
	return Result{Dead: c.pop(len(c.window)), Reason: reason}
}

// pop removes the first n events, which are finished.
func (c *Core) pop(n int) []Event {
	out := c.window[:n:n]
	c.window = c.window[n:]
	for _, e := range out {
		c.bytes -= len(e.Item)
	}
	c.attempts, c.notBefore = 0, time.Time{}
	if c.Cursor() >= c.splitUntil {
		c.splitCap = 0
	}
	return out
}

func (c *Core) oldestCreated(n int) time.Time {
	oldest := c.window[0].Delivery.CreatedAt
	for _, e := range c.window[1:n] {
		if e.Delivery.CreatedAt.Before(oldest) {
			oldest = e.Delivery.CreatedAt
		}
	}
	return oldest
}
