package engine

// Ownership across members: a member that lost its partition can neither
// move the next owner's commit (the group fences it) nor keep attempts of
// the partition running once it learns of the loss.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/testkit/testenv"
	"github.com/laneway/laneway/partition"
)

// TestZombieCommitIsRefused makes member A a zombie (issue #13, item 17):
// A owns both partitions and has delivered a record of partition 0 that it
// has not committed yet; then its poll loop blocks (routing a delivery of
// partition 1 waits on its endpoint source), so it cannot rejoin when B
// joins, and the group drops it at the rebalance timeout and gives B both
// partitions. B delivers both partitions further and commits. A, still
// holding partition 0 as far as it knows, then runs its commit path for it
// (the stage's commitPartitions: the deliveries watermark with the parked
// progress as metadata, under A's old generation): the group must refuse
// it, and B's committed offset and metadata must stay as B wrote them.
//
// Once unblocked, A learns that it was dropped. franz-go may then call
// OnPartitionsLost, or (after the refused commit) rejoin first and revoke
// the partitions under its new generation, where a commit would be
// accepted: either way A must release them without committing, and no
// commit may fall below B's.
func TestZombieCommitIsRefused(t *testing.T) {
	stageBackends(t, 2, func(t *testing.T, r *stageRig) {
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
		eps := []endpoint.Endpoint{testEndpoint("ep-0", rc.URL("/ep-0")), testEndpoint("ep-block", rc.URL("/ep-block"))}
		blocking := &blockingEndpoints{fakeEndpoints: newFakeEndpoints(eps...), id: "ep-block",
			entered: make(chan struct{}), release: make(chan struct{})}
		defer blocking.unblock()
		// A member that does not rejoin within the rebalance timeout is
		// dropped from the group: short, so the test does not wait a minute.
		groupTimeouts := func(c *DeliveryConfig) {
			c.ClientOpts = append(c.ClientOpts, kgo.RebalanceTimeout(5*time.Second))
		}
		aLog := &logRecorder{}
		a := r.startStage(stageOpts{endpoints: blocking, tweak: func(c *DeliveryConfig) {
			groupTimeouts(c)
			c.Logger = slog.New(aLog)
			c.CommitInterval = time.Hour // A commits only when the test runs its commit path, or on release
		}})
		a.waitOwned(t, 0)
		a.waitOwned(t, 1)
		r.produce(0, testDelivery("evt-a", "ep-0", "order:a", 1))
		a.events.waitAttempts(t, 30*time.Second, "delivered", 1)
		aOwner := a.owned(0)
		var pending partition.Commit
		var moved bool
		aOwner.do(func(o *partition.Owner) { pending, moved = o.PendingCommit() })
		if !moved || pending.Deliveries != 1 {
			t.Fatalf("A's pending commit of partition 0 is %+v (moved %v), want offset 1", pending, moved)
		}

		r.produce(1, testDelivery("evt-block", "ep-block", "order:block", 1))
		select {
		case <-blocking.entered:
		case <-time.After(30 * time.Second):
			t.Fatal("A never routed the delivery that blocks its poll loop")
		}

		b := r.startStage(stageOpts{endpoints: newFakeEndpoints(eps...), tweak: groupTimeouts})
		b.waitOwned(t, 0)
		b.waitOwned(t, 1)
		r.produce(0, testDelivery("evt-b0", "ep-0", "order:b0", 1))
		r.produce(1, testDelivery("evt-b1", "ep-0", "order:b1", 1))
		waitCond(t, time.Minute, "B's commits past evt-b0 and evt-b1", func() (bool, string) {
			at0, at1 := r.committed(0), r.committed(1)
			return at0 == 2 && at1 == 2, "committed " + itoa(at0) + ", " + itoa(at1)
		})
		bAt, bMeta := r.committedWithMetadata(t, 0)
		if _, err := partition.DecodeProgress(bMeta); err != nil {
			t.Fatalf("B's commit metadata %q holds no parked progress: %v", bMeta, err)
		}

		if a.owned(0) != aOwner {
			t.Fatal("A gave partition 0 up already: it is no zombie")
		}
		err := a.commitPartitions(context.Background(), a.client, []*driven{aOwner})
		if !fencedCommit(err) {
			t.Fatalf("the zombie's commit of partition 0 (offset %d) returned %v, want the group to refuse it", pending.Deliveries, err)
		}
		t.Logf("the zombie's commit was refused: %v", err)
		if at, meta := r.committedWithMetadata(t, 0); at != bAt || meta != bMeta {
			t.Fatalf("after the zombie's commit partition 0 is committed at %d with %q, want B's %d with %q", at, meta, bAt, bMeta)
		}
		aOwner.do(func(o *partition.Owner) { _, moved = o.PendingCommit() })
		if !moved {
			t.Fatal("the refused commit was recorded as committed by A's owner")
		}

		blocking.unblock()
		a.events.Wait(t, time.Minute, "A to release a partition", func(e Event) bool { return e.Kind == EventReleased })
		releases := aLog.find("deliveries partition released")
		if len(releases) == 0 {
			t.Fatal("A released a partition without logging it")
		}
		for _, rel := range releases {
			if rel["committed"] != "false" {
				t.Errorf("A released partition %s committing its stale watermark: %v", rel["partition"], rel)
			}
		}
		for _, e := range a.events.All() {
			if e.Kind == EventCommitted {
				t.Errorf("A committed partition %d at %d after it was dropped from the group", e.Partition, e.Offset)
			}
		}
		for p, at := range []int64{r.committed(0), r.committed(1)} {
			if at < bAt {
				t.Errorf("partition %d committed at %d after A's release, below B's %d", p, at, bAt)
			}
		}
	})
}

// fencedCommit reports whether err is the group refusing a commit from a
// member that is no longer (or not in this generation) the owner.
func fencedCommit(err error) bool {
	for _, want := range []error{kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.FencedInstanceID, kerr.RebalanceInProgress} {
		if errors.Is(err, want) {
			return true
		}
	}
	return false
}

// TestLostPartitionCancelsAttemptsAtOnce holds an attempt at the receiver
// (AttemptTimeout and RevokeTimeout a minute) and has the group drop the
// member (an admin LeaveGroup of its static instance id, as a session
// expiry would): its next heartbeat learns that, and franz-go calls
// OnPartitionsLost. The next owner may already be delivering the
// partition's entities, so the attempt must be canceled at once, not
// awaited up to RevokeTimeout as on a graceful revoke; it counts as
// "canceled" only (no retry, no breaker record), and the delivery stays
// unfinished, so it is made again once the member rejoins.
func TestLostPartitionCancelsAttemptsAtOnce(t *testing.T) {
	const attemptTimeout, revokeTimeout = time.Minute, time.Minute
	// A heartbeat interval (3 s) to learn the loss, then the release: well
	// under RevokeTimeout.
	const bound = 20 * time.Second
	stageBackends(t, 1, func(t *testing.T, r *stageRig) {
		rc := holdFirstReceiver(t, 2*attemptTimeout)
		eps := newFakeEndpoints(testEndpoint("ep-1", rc.URL("/ep-1")))
		br := newFakeBreakers()
		instance := testenv.Unique("member")
		s := r.startStage(stageOpts{endpoints: eps, breakers: br, tweak: func(c *DeliveryConfig) {
			c.AttemptTimeout, c.RevokeTimeout = attemptTimeout, revokeTimeout
			c.SessionTimeout = 2 * attemptTimeout // the lease must fit an attempt
			c.ClientOpts = append(c.ClientOpts, kgo.InstanceID(instance))
		}})
		s.waitOwned(t, 0)
		r.produce(0, testDelivery("evt-held", "ep-1", "order:1", 1))
		rc.next(t, 30*time.Second, "the held attempt")
		// Nothing left to commit: a commit refused after the removal would
		// make franz-go rejoin (keeping the partition, as no other member
		// took it) rather than report it lost; the heartbeat does.
		waitCond(t, 30*time.Second, "the stage to have committed all it has", func() (bool, string) {
			var moved bool
			s.owned(0).do(func(o *partition.Owner) { _, moved = o.PendingCommit() })
			return !moved, "a commit pending"
		})

		lostAt := time.Now()
		r.removeMember(t, instance)
		s.events.Wait(t, bound, "the lost partition's release", func(e Event) bool {
			return e.Kind == EventReleased && e.Partition == 0
		})
		took := time.Since(lostAt)
		t.Logf("the lost partition was released %v after the member was dropped", took.Round(time.Millisecond))
		// The release waited for the canceled attempt to return: it is
		// counted, and the receiver sees its request end.
		checkCanceledOnly(t, s, br, 1)
		rc.waitEnded(t, 0)

		// The member rejoins under its instance id and makes the delivery again.
		s.events.waitAttempts(t, time.Minute, "delivered", 1)
		if got := rc.answered("evt-held", http.StatusOK); got != 1 {
			t.Fatalf("evt-held answered 200 %d times, want 1", got)
		}
	})
}

// blockingEndpoints is an endpoint source whose Get of one endpoint blocks
// until unblock: the stage routing a delivery of it (in its poll loop,
// which then holds up the member's rebalance) waits there.
type blockingEndpoints struct {
	*fakeEndpoints
	id       string
	entered  chan struct{} // closed when a Get of id first waits
	release  chan struct{}
	once     sync.Once
	unblocks sync.Once
}

func (b *blockingEndpoints) Get(id string) (endpoint.Endpoint, bool) {
	if id == b.id {
		b.once.Do(func() { close(b.entered) })
		<-b.release
	}
	return b.fakeEndpoints.Get(id)
}

func (b *blockingEndpoints) unblock() { b.unblocks.Do(func() { close(b.release) }) }

// logRecorder is a slog.Handler that keeps every record's message and
// attributes (values as text), for tests that check what a stage logged.
type logRecorder struct {
	mu      sync.Mutex
	records []map[string]string // "msg" and each attribute
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		rec[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, rec)
	return nil
}

func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// find returns the records with message msg.
func (l *logRecorder) find(msg string) []map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]string
	for _, r := range l.records {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// removeMember has the group coordinator drop the static member instance
// (an admin LeaveGroup), as it drops a member whose session expired.
func (r *stageRig) removeMember(t *testing.T, instance string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := r.adm.LeaveGroup(ctx, kadm.LeaveGroup(r.group).InstanceIDs(instance).Reason("test: the member is gone"))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("removing member %s from %s: %v", instance, r.group, err)
	}
}

// committedWithMetadata returns the group's committed offset of deliveries
// partition p and its metadata.
func (r *stageRig) committedWithMetadata(t *testing.T, p int32) (int64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := r.adm.FetchOffsets(ctx, r.group)
	if err != nil {
		t.Fatalf("fetching the commits of %s: %v", r.group, err)
	}
	o, ok := resp.Lookup(r.tops.Deliveries, p)
	if !ok || o.Err != nil {
		t.Fatalf("no commit of partition %d: %v", p, o.Err)
	}
	return o.At, o.Metadata
}

// TestDroppedMemberStartsNothingUntilItRejoins is a zombie: the group drops
// the member (an admin LeaveGroup of its static instance, as a session
// expiry does) while franz-go has not told it yet (its own heartbeat is 10 s
// apart here, and it commits once a minute), so it still owns its
// partition. An answer arrives then, as answers that came while a process
// was frozen do when it wakes: the entity's next delivery must not start
// until the member has released the partition as lost and rejoined. The
// fence's heartbeat has revoked the lease. Without it the next delivery
// starts at once, beside whoever the group gave the partition to.
func TestDroppedMemberStartsNothingUntilItRejoins(t *testing.T) {
	stageBackends(t, 1, func(t *testing.T, r *stageRig) {
		held, answer := make(chan struct{}), make(chan struct{})
		rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
			if req.Header.Get("webhook-id") == "evt-held" {
				close(held)
				<-answer
			}
			w.WriteHeader(http.StatusOK)
		})
		eps := newFakeEndpoints(testEndpoint("ep-1", rc.URL("/ep-1")))
		instance := testenv.Unique("member")
		s := r.startStage(stageOpts{endpoints: eps, tweak: func(c *DeliveryConfig) {
			c.FenceInterval, c.CommitInterval = 100*time.Millisecond, time.Minute
			c.ClientOpts = append(c.ClientOpts, kgo.InstanceID(instance), kgo.HeartbeatInterval(10*time.Second))
		}})
		s.waitOwned(t, 0)
		r.produce(0, testDelivery("evt-held", "ep-1", "order:2", 1), testDelivery("evt-next", "ep-1", "order:2", 2))
		waitClosed(t, held, 30*time.Second, "evt-held's request")

		r.removeMember(t, instance)
		droppedAt := time.Now()
		s.events.Wait(t, 30*time.Second, "the fence to learn that the member was dropped", func(e Event) bool {
			return e.Kind == EventLeaseRevoked
		})
		t.Logf("the fence learned of it after %v", time.Since(droppedAt).Round(time.Millisecond))
		close(answer) // the zombie now holds an answer; evt-next is its entity's next delivery
		s.events.Wait(t, time.Minute, "the lost partition's release", func(e Event) bool {
			return e.Kind == EventReleased && e.Partition == 0
		})
		releasedAt := time.Now()
		t.Logf("the member released the partition as lost after %v", releasedAt.Sub(droppedAt).Round(time.Millisecond))
		waitCond(t, time.Minute, "evt-next delivered once the member rejoined", func() (bool, string) {
			return rc.answered("evt-next", http.StatusOK) >= 1, fmt.Sprintf("%+v", rc.requests())
		})
		for _, rq := range rc.requests() {
			if rq.MsgID == "evt-next" && rq.At.Before(releasedAt) {
				t.Fatalf("evt-next was sent %v after the group dropped the member, before it released the partition (%v)",
					rq.At.Sub(droppedAt).Round(time.Millisecond), releasedAt.Sub(droppedAt).Round(time.Millisecond))
			}
		}
	})
}

// waitClosed waits for ch to close, or fails after within.
func waitClosed(t *testing.T, ch <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("nothing within %v: %s", within, what)
	}
}
