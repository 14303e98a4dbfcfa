package chaos

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/testkit/poll"
)

// The scenarios of this file attack one endpoint's lane while its attempts
// are in flight or its backlog is parked: pause, rebalance and kill -9 at
// those moments. They exposed engine bugs (docs/reliability.md F7, F8) and
// run in the default set since the partition owner's rewrite fixed them.

// pauseFailResume: the target endpoint's receiver holds every request
// 1.5 s and answers 503; while 8 attempts are in flight the endpoint is
// paused; they fail and wait for their retry while it is paused; the
// receiver is fixed and the endpoint resumed. Every revision must arrive.
// State events only, over many entities; the entities whose attempts failed
// are published no more, so that a failed revision that is then dropped
// cannot pass for superseded.
var pauseFailResume = Scenario{
	Name: "pause-fail-resume",
	Doc: "state updates over 2,000 entities; the target receiver (max_concurrency 8) holds each request 1.5 s and " +
		"answers 503; with its 8 attempts in flight the endpoint is paused (API), the attempts fail and wait for their " +
		"retry while it is paused, the receiver is fixed, the endpoint resumed; the failed entities get no newer revision",
	Instances: fixed(2),
	Fleet: []endpointSpec{
		{Name: "target", Tenant: "t0", MaxConcurrency: 8},
		{Name: "fast-a", Tenant: "t0", MaxConcurrency: 8},
	},
	Tenants: 1, StatesOnly: true, Entities: 2000,
	// The 503s must not open the breaker: the pause is the API's.
	Flags: []string{"--breaker-threshold", "100000"},
	Inject: func(ctx context.Context, h *Harness) error {
		const hold = 1500 * time.Millisecond
		target, id := h.endpoint("target"), h.runEndpoint("target").id
		mc := int64(h.runEndpoint("target").spec.MaxConcurrency)
		f := h.Fault("receiver holds 1.5 s + 503; paused with attempts in flight; fixed; resumed", "target", []string{"target"})
		from := len(h.recv.RequestsOf(id))
		target.SetHold(Mode503, hold)
		if err := h.waitUntil(ctx, 15*time.Second, fmt.Sprintf("%d attempts in flight at target", mc), func() bool {
			return target.InFlight() >= mc
		}); err != nil {
			return err
		}
		h.pub.Exclude(target.RunningEntities()...)
		if err := h.setPaused(ctx, "target", true); err != nil {
			return err
		}
		pausedAt := time.Now()
		if err := h.waitPausedSeen(ctx, "target", true); err != nil {
			return err
		}
		seenAt := time.Now()
		if err := h.waitUntil(ctx, 10*hold, "the held attempts answered", func() bool { return target.InFlight() == 0 }); err != nil {
			return err
		}
		failed, attempts := map[string]bool{}, 0
		for _, rq := range h.recv.RequestsOf(id)[from:] {
			if rq.Status == http.StatusServiceUnavailable {
				failed[rq.Entity] = true
				attempts++
			}
		}
		h.pub.Exclude(keys(failed)...)
		// Paused long enough for the retries (Retry-After: 1) to come due.
		if !timing.Sleep(ctx, 3*time.Second) {
			return ctx.Err()
		}
		started := 0
		for _, rq := range h.recv.RequestsOf(id)[from:] {
			if rq.At.After(seenAt.Add(500 * time.Millisecond)) {
				started++
			}
		}
		h.cfg.logf("%s: %d attempts failed with 503 (%d entities); paused %v after the hold began; %d requests started "+
			"more than 0.5 s after every instance showed the pause, %d in flight now (a paused endpoint should start none)",
			h.sc.Name, attempts, len(failed), pausedAt.Sub(h.faultAt(f)).Round(time.Millisecond), started, target.InFlight())
		target.SetMode(ModeOK)
		if err := h.setPaused(ctx, "target", false); err != nil {
			return err
		}
		h.Restored(f)
		return nil
	},
}

// rebalanceLongAttempt: attempts that take 20 s (attempt timeout 30 s) are
// in flight at three held endpoints when an instance joins, and again when
// the owner of the one with the most attempts in flight stops gracefully. No two attempts of one
// (endpoint, entity) may be in flight at once, and no revision may be first
// delivered after a newer one.
var rebalanceLongAttempt = Scenario{
	Name: "rebalance-long-attempt",
	Doc: "--attempt-timeout 30s; three endpoints' receivers hold every request 20 s; with their attempts in flight " +
		"a third instance joins, then the owner of the held endpoint with the most attempts in flight stops gracefully " +
		"(SIGTERM); then the receivers answer at once",
	Instances: fixed(2),
	Fleet: []endpointSpec{
		{Name: "held-1", Tenant: "t0", MaxConcurrency: 4},
		{Name: "held-2", Tenant: "t0", MaxConcurrency: 4},
		{Name: "held-3", Tenant: "t0", MaxConcurrency: 4},
		{Name: "fast-a", Tenant: "t0", MaxConcurrency: 8},
	},
	Tenants: 1,
	// The member's lease must fit a 30 s attempt (engine, fence.go): a
	// session timeout of 6 s would leave it no room, and the instance
	// would refuse to start.
	Flags: []string{"--attempt-timeout", "30s", "--session-timeout", "45s"},
	Tail:  2 * time.Second,
	Inject: func(ctx context.Context, h *Harness) error {
		const hold = 20 * time.Second
		held := []string{"held-1", "held-2", "held-3"}
		for _, name := range held {
			h.endpoint(name).SetHold(ModeOK, hold)
		}
		defer func() {
			for _, name := range held {
				h.endpoint(name).SetMode(ModeOK)
			}
		}()
		if err := h.waitUntil(ctx, 15*time.Second, "every held endpoint's attempts in flight", func() bool {
			for _, name := range held {
				if h.endpoint(name).InFlight() < int64(h.runEndpoint(name).spec.MaxConcurrency) {
					return false
				}
			}
			return true
		}); err != nil {
			return err
		}
		before, err := h.owners(ctx, held)
		if err != nil {
			return err
		}
		f := h.Fault("instance joins with 20 s attempts in flight", "instance 3", []string{"fast-a"})
		joined, err := h.addInstance(ctx)
		if err != nil {
			return err
		}
		if err := h.waitGroups(ctx, 3); err != nil {
			return err
		}
		h.Restored(f)
		after, err := h.owners(ctx, held)
		if err != nil {
			return err
		}
		var moved []string
		for _, name := range held {
			if before[name] != after[name] {
				moved = append(moved, fmt.Sprintf("%s %s -> %s", name, before[name], after[name]))
			}
		}
		h.cfg.logf("%s: %s joined; held endpoints that changed owner: %v", h.sc.Name, joined.ID, moved)

		// The second rebalance: the owner of the held endpoint with the most
		// attempts in flight stops gracefully.
		var target string
		if err := h.waitUntil(ctx, 20*time.Second, "attempts in flight at a held endpoint", func() bool {
			target = ""
			var most int64
			for _, name := range held {
				if n := h.endpoint(name).InFlight(); n > most {
					most, target = n, name
				}
			}
			return target != ""
		}); err != nil {
			return err
		}
		owner, _, err := h.ownerOf(ctx, target)
		if err != nil {
			return err
		}
		inFlight := h.endpoint(target).InFlight()
		f = h.Fault("SIGTERM of a held endpoint's owner with 20 s attempts in flight", owner.ID, []string{"fast-a"})
		stopErr := owner.Stop(time.Minute)
		h.cfg.logf("%s: %s (owner of %s, %d attempts in flight there) stopped in %v: %v", h.sc.Name, owner.ID, target, inFlight,
			time.Since(h.faultAt(f)).Round(time.Millisecond), stopErr)
		if err := h.waitGroups(ctx, 2); err != nil {
			return err
		}
		h.Restored(f)
		return stopErr
	},
}

// killWhileParkedDrains: the parky endpoint is paused while state updates
// flow, so its backlog is parked; publishing stops (every entity's last
// revision is in the backlog), the endpoint is resumed, and while the
// backlog drains its owner is killed (-9) and restarted.
var killWhileParkedDrains = Scenario{
	Name: "kill-while-parked-drains",
	Doc: "state updates over 2,000 entities; parky (max_concurrency 4, answers in 20 ms) paused for 8 s so its " +
		"backlog is parked; publishing stops; resumed; kill -9 of its owner once 200 deliveries of the backlog " +
		"arrived, restarted at once",
	Instances: fixed(2),
	Fleet: []endpointSpec{
		{Name: "parky", Tenant: "t0", MaxConcurrency: 4, Delay: 20 * time.Millisecond},
		{Name: "fast-a", Tenant: "t0", MaxConcurrency: 8},
	},
	Tenants: 1, StatesOnly: true, Entities: 2000,
	Tail: time.Second,
	Inject: func(ctx context.Context, h *Harness) error {
		id := h.runEndpoint("parky").id
		f := h.Fault("paused: backlog parked; resumed; kill -9 of its owner mid-drain; restarted", "parky", []string{"parky"})
		if err := h.setPaused(ctx, "parky", true); err != nil {
			return err
		}
		if err := h.waitPausedSeen(ctx, "parky", true); err != nil {
			return err
		}
		if !timing.Sleep(ctx, 8*time.Second) {
			return ctx.Err()
		}
		h.stopLoad()
		from := h.receiptsOf(id)
		if err := h.setPaused(ctx, "parky", false); err != nil {
			return err
		}
		if err := h.waitUntil(ctx, 30*time.Second, "200 deliveries of parky's backlog", func() bool {
			return h.receiptsOf(id)-from >= 200
		}); err != nil {
			return err
		}
		owner, p, err := h.ownerOf(ctx, "parky")
		if err != nil {
			return err
		}
		h.cfg.logf("%s: killing %s (owner of parky, deliveries partition %d) after %d deliveries of the backlog",
			h.sc.Name, owner.ID, p, h.receiptsOf(id)-from)
		return h.bounce(ctx, f, owner.Kill, 0, owner.Start)
	},
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// faultAt is when fault i began.
func (h *Harness) faultAt(i int) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.faults[i].At
}

// receiptsOf counts the receipts of endpoint id so far.
func (h *Harness) receiptsOf(id string) int {
	n := 0
	for _, r := range h.recv.Receipts() {
		if r.Endpoint == id {
			n++
		}
	}
	return n
}

// waitUntil polls cond until it holds, or fails after timeout.
func (h *Harness) waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	return waitFor(ctx, timeout, h.sc.Name+": "+what, cond)
}

// waitFor polls cond until it holds, or fails after timeout naming what
// it waited for.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := poll.Until(waitCtx, 20*time.Millisecond, cond); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("waited %v for %s", timeout, what)
	}
	return nil
}

// setPaused pauses or resumes endpoint name through the API of a running
// instance (POST /v1/endpoints/{id}/pause or /resume).
func (h *Harness) setPaused(ctx context.Context, name string, paused bool) error {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	err := fmt.Errorf("no running instance to %s %s", verb, name)
	for _, in := range h.instanceList() {
		if !in.Running() {
			continue
		}
		api, apiErr := instanceAPI(in, client.DefaultTimeout)
		if apiErr != nil {
			return apiErr
		}
		if _, err = api.Call(ctx, http.MethodPost, "/v1/endpoints/"+h.runEndpoint(name).id+"/"+verb, nil, nil, nil, nil); err == nil {
			h.cfg.logf("%s: %s %sd through %s", h.sc.Name, name, verb, in.ID)
			return nil
		}
		err = fmt.Errorf("%s %s through %s: %w", verb, name, in.ID, err)
	}
	return err
}

// waitPausedSeen waits until every running instance's API shows endpoint
// name paused (or not): the change reached every instance's endpoint store.
func (h *Harness) waitPausedSeen(ctx context.Context, name string, paused bool) error {
	id := h.runEndpoint(name).id
	return h.waitUntil(ctx, 30*time.Second, fmt.Sprintf("every instance to show %s paused=%t", name, paused), func() bool {
		for _, in := range h.instanceList() {
			if !in.Running() {
				continue
			}
			api, err := instanceAPI(in, 5*time.Second)
			if err != nil {
				return false
			}
			if ep, err := api.GetEndpoint(ctx, id); err != nil || ep.Paused != paused {
				return false
			}
		}
		return true
	})
}

// ownerOf finds the instance that owns endpoint name's deliveries partition
// (the partition of its id, as Laneway's producers key it) in the
// deliveries group, by the static member's instance id.
func (h *Harness) ownerOf(ctx context.Context, name string) (*Instance, int32, error) {
	id, p, err := DeliveriesOwner(ctx, kadm.NewClient(h.admin), h.name, h.cfg.Partitions, h.runEndpoint(name).id)
	if err != nil {
		return nil, p, err
	}
	for _, in := range h.instanceList() {
		if in.ID == id {
			return in, p, nil
		}
	}
	return nil, p, fmt.Errorf("partition %d of %s.deliveries is owned by %s, not one of the harness's instances", p, h.name, id)
}

// DeliveriesOwner returns the instance id (--instance-id) of the member of
// the deliveries group of the run with prefix that owns endpoint id's
// deliveries partition (the partition of its id, as Laneway's producers
// key it, among partitions): the instance whose crash hits that endpoint.
func DeliveriesOwner(ctx context.Context, adm *kadm.Client, prefix string, partitions int, endpointID string) (string, int32, error) {
	topic := prefix + ".deliveries"
	p := int32(kgo.StickyKeyPartitioner(nil).ForTopic(topic).Partition(&kgo.Record{Key: []byte(endpointID)}, partitions))
	group := topics.GroupsFor(prefix).Deliveries
	reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	described, err := adm.DescribeGroups(reqCtx, group)
	if err != nil {
		return "", p, err
	}
	for _, m := range described[group].Members {
		c, ok := m.Assigned.AsConsumer()
		if !ok || m.InstanceID == nil {
			continue
		}
		for _, tp := range c.Topics {
			if tp.Topic == topic && slices.Contains(tp.Partitions, p) {
				return *m.InstanceID, p, nil
			}
		}
	}
	return "", p, fmt.Errorf("nobody owns partition %d of %s (group %s is %s)", p, topic, group, described[group].State)
}

// owners maps each named endpoint to its owner's id ("?" when unknown).
func (h *Harness) owners(ctx context.Context, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range names {
		in, p, err := h.ownerOf(ctx, name)
		if err != nil {
			return nil, err
		}
		out[name] = fmt.Sprintf("%s (p%d)", strings.TrimPrefix(in.ID, h.name+"-"), p)
	}
	return out, nil
}
