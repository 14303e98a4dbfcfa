package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/partition"
)

// The fence keeps the member's lease (partition.Lease): the time until
// which the group cannot have given this member's partitions to another.
//
// franz-go heartbeats on its own, but tells nobody when a heartbeat was
// answered, so the stage sends heartbeats of its own to the group
// coordinator, under the member id and generation franz-go joined with: a
// classic-protocol heartbeat only renews the session it names, so these
// change nothing for franz-go. An answer without an error renews the lease
// from the heartbeat's sending. REBALANCE_IN_PROGRESS renews nothing: the
// member is still in the group, but the rebalance drops it if it does not
// rejoin within the rebalance timeout, so the lease is renewed no further
// than that timeout after the last heartbeat answered without an error
// (the rebalance began after it). UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION and FENCED_INSTANCE_ID revoke it at once: franz-go
// learns the same from its own heartbeat and releases the partitions as
// lost, and nothing starts meanwhile.

// DefaultFenceInterval bounds how often the fence heartbeats.
const DefaultFenceInterval = time.Second

// fenceIntervalFor is the fence's pace: a twentieth of the session, at
// most DefaultFenceInterval, so that the lease is renewed well before an
// attempt's length is all that is left of it.
func fenceIntervalFor(session time.Duration) time.Duration {
	return min(DefaultFenceInterval, session/20)
}

// heartbeatOutcome is what one fence heartbeat came to (a metric label).
type heartbeatOutcome string

const (
	heartbeatRenewed     heartbeatOutcome = "renewed"
	heartbeatRebalancing heartbeatOutcome = "rebalancing"
	heartbeatFenced      heartbeatOutcome = "fenced"
	heartbeatFailed      heartbeatOutcome = "failed"
	heartbeatNotJoined   heartbeatOutcome = "not_joined"
)

// groupClient is what the fence needs of franz-go's client.
type groupClient interface {
	GroupMetadata() (memberID string, generation int32)
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// fence heartbeats and renews the lease; run is its only goroutine.
type fence struct {
	client     groupClient
	group      string
	instanceID *string // static membership's group.instance.id
	lease      *partition.Lease
	every      time.Duration
	now        func() time.Time
	log        *slog.Logger
	metrics    *Metrics
	emit       func(Event)
	nudge      chan struct{}
	// rebalance is the group's rebalance timeout, and confirmed the
	// sending of the last heartbeat answered without an error: a
	// rebalance that began after it drops a member that has not rejoined
	// by confirmed + rebalance.
	rebalance time.Duration
	confirmed time.Time
}

func newFence(group string, lease *partition.Lease, every time.Duration, now func() time.Time, log *slog.Logger, m *Metrics,
	emit func(Event)) *fence {
	return &fence{group: group, lease: lease, every: every, now: now, log: log, metrics: m, emit: emit,
		nudge: make(chan struct{}, 1), rebalance: 60 * time.Second}
}

// attach gives the fence the group client, before run.
func (f *fence) attach(cl *kgo.Client) {
	f.client = cl
	if d, ok := cl.OptValue(kgo.RebalanceTimeout).(time.Duration); ok && d > 0 {
		f.rebalance = d
	}
	if v := cl.OptValues(kgo.InstanceID); len(v) == 2 && v[1] == true {
		id := v[0].(string)
		f.instanceID = &id
	}
}

// poke asks for a heartbeat now: an assignment has just been made, and its
// owners start nothing until the lease holds.
func (f *fence) poke() {
	select {
	case f.nudge <- struct{}{}:
	default:
	}
}

// run heartbeats every interval, and when poked, until ctx ends.
func (f *fence) run(ctx context.Context) {
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		f.beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-f.nudge:
		}
	}
}

// beat sends one heartbeat and acts on its answer.
func (f *fence) beat(ctx context.Context) {
	outcome := f.heartbeat(ctx)
	f.metrics.fenceHeartbeat(string(outcome), f.lease.Remaining(f.now()))
}

func (f *fence) heartbeat(ctx context.Context) heartbeatOutcome {
	member, gen := f.client.GroupMetadata()
	if member == "" || gen < 0 {
		return heartbeatNotJoined
	}
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.Generation, req.MemberID, req.InstanceID = f.group, gen, member, f.instanceID
	ctx, cancel := context.WithTimeout(ctx, max(f.every, time.Second))
	defer cancel()
	sentAt := f.now()
	resp, err := f.client.Request(ctx, req)
	if err != nil {
		f.log.Debug("fence heartbeat failed; the lease is not renewed", "err", err)
		return heartbeatFailed
	}
	err = kerr.ErrorForCode(resp.(*kmsg.HeartbeatResponse).ErrorCode)
	switch {
	case err == nil:
		f.lease.Renew(sentAt)
		f.confirmed = sentAt
		return heartbeatRenewed
	case errors.Is(err, kerr.RebalanceInProgress):
		// The answer renewed the session, but the rebalance drops a member
		// that does not rejoin within its timeout, counted from its start,
		// which came after the last confirmed heartbeat was sent.
		if !f.confirmed.IsZero() {
			f.lease.RenewWithin(sentAt, f.confirmed.Add(f.lease.Span(f.rebalance)))
		}
		return heartbeatRebalancing
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.FencedInstanceID):
		if m, g := f.client.GroupMetadata(); m != member || g != gen {
			return heartbeatFailed // franz-go rejoined meanwhile: the answer is about a membership already given up
		}
		f.lease.Revoke(f.now())
		f.emit(Event{Kind: EventLeaseRevoked, Reason: err.Error()})
		f.log.Warn("the group no longer counts this member in: its lease is revoked, nothing starts until it rejoins",
			"member_id", member, "generation", gen, "err", err)
		return heartbeatFenced
	default:
		f.log.Debug("fence heartbeat answered with an error; the lease is not renewed", "err", err)
		return heartbeatFailed
	}
}

// errLeaseLapsed cancels an attempt the lease no longer covers.
var errLeaseLapsed = errors.New("the member's group lease would end before the attempt (fenced)")
