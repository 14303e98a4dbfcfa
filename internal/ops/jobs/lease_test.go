package jobs

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestJobsRunnerThatLostItsLeaseStops runs one job on two runners: the
// first one's step outlasts its lease, and the second takes the job over.
// The first must learn it at its next renewal, stop its step and write
// nothing more; no offset is copied twice, and the job ends done as the
// second runner saved it.
func TestJobsRunnerThatLostItsLeaseStops(t *testing.T) {
	for name, f := range fixtures(t, 20) {
		t.Run(name, func(t *testing.T) {
			tk := f.takeOver(t, 10*time.Millisecond)
			select {
			case <-tk.ka.cancelled:
			case <-time.After(30 * time.Second):
				t.Fatal("the runner that lost its lease still runs its step")
			}
			tk.finish(t, f, 20, 0)
		})
	}
}

// TestJobsRunnerThatLostItsLeaseWritesNothing lets the first runner end
// its step after the second took the job over, before any renewal told
// it: its save must be refused, and it must stop there rather than
// overwrite the second runner's record or run another step.
func TestJobsRunnerThatLostItsLeaseWritesNothing(t *testing.T) {
	for name, f := range fixtures(t, 20) {
		t.Run(name, func(t *testing.T) {
			tk := f.takeOver(t, time.Hour)
			tk.ka.gate <- struct{}{} // its page is copied: the markers keep it from being copied again
			tk.finish(t, f, 10, 10)
		})
	}
}

// takeOver is two runners on one job: a's step outlasted its lease, and b
// took the job over; both hold their first step. Both renew every
// renewEvery.
type takeOver struct {
	a, b   *Runner[request, Job[request]]
	ka, kb *copier
	id     string
}

func (f *fixture) takeOver(t *testing.T, renewEvery time.Duration) takeOver {
	t.Helper()
	tk := takeOver{ka: f.held(t, 10), kb: f.held(t, 10)}
	tk.ka.cancelled = make(chan string, 1)
	renew := func(c *Config[request, Job[request]]) { c.RenewEvery = renewEvery }
	tk.a, tk.b = f.runner(t, tk.ka, renew), f.runner(t, tk.kb, renew)
	tk.id = start(t, tk.a, request{Name: "x"}).ID
	receive(t, tk.ka.entered)
	f.lapse(t, tk.id) // the step outlasts its lease
	if got, created, err := tk.b.Submit(context.Background(), request{Name: "x"}, ""); err != nil || !created {
		t.Fatalf("second runner after the lease lapsed: %+v created %v, %v; want it to take the job", got, created, err)
	}
	receive(t, tk.kb.entered)
	return tk
}

// finish checks that a let go of the job without writing, then runs b to
// the end: the job is done with sent and alreadySent as b counted them,
// and no offset was copied twice.
func (tk takeOver) finish(t *testing.T, f *fixture, sent, alreadySent int64) {
	t.Helper()
	waitGone(t, tk.a, tk.id)
	if s := f.stored(t, tk.b, tk.id); s.Status != StatusRunning || s.Cursor != "" || s.Sent != 0 || s.Error != "" {
		t.Fatalf("record after the first runner stopped: %+v; want it untouched", s)
	}
	tk.kb.gate <- struct{}{}
	if c := receive(t, tk.kb.entered); c != "10" {
		t.Fatalf("second step at %q", c)
	}
	tk.kb.gate <- struct{}{}
	if done := waitStatus(t, tk.b, tk.id, StatusDone); done.Sent != sent || done.AlreadySent != alreadySent {
		t.Fatalf("job %+v: want %d sent, %d already sent", done, sent, alreadySent)
	}
	copied := append(tk.ka.copied(), tk.kb.copied()...)
	slices.Sort(copied)
	if !slices.Equal(copied, offsets(0, 20)) {
		t.Fatalf("copied %v, want offsets 0 to 19 once each", copied)
	}
}

// lapse ends the job's lease as its expiry would.
func (f *fixture) lapse(t *testing.T, id string) {
	t.Helper()
	if err := f.rdb.Del(context.Background(), f.prefix+"lease:"+id).Err(); err != nil {
		t.Fatal(err)
	}
}

// waitGone waits, on the runner's changes, until it no longer runs job id.
func waitGone(t *testing.T, r *Runner[request, Job[request]], id string) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		changed := r.Watch()
		if _, ok := r.snapshot(id); !ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("job %s still runs here", id)
		}
	}
}
