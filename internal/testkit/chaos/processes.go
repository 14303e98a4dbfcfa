package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/security/secretbox"
)

// lanewayArgs are the flags every instance of the run gets.
func (h *Harness) lanewayArgs(id, addr string) []string {
	args := []string{"serve",
		"--kafka-brokers", strings.Join(h.env.Brokers, ","), "--redis-url", h.env.RedisURL,
		"--http-addr", addr, "--instance-id", id,
		"--topic-prefix", h.name, "--group-prefix", h.name, "--partitions", fmt.Sprint(h.cfg.Partitions),
		"--allow-targets", "127.0.0.0/8", "--secrets-key-file", h.keyFile(),
		"--session-timeout", h.cfg.SessionTimeout.String(), "--commit-interval", "200ms",
		// Parking is exercised: the slow endpoint falls behind and parks.
		"--park-after", "2s",
		// Retries, dead letters and the breaker within a scenario's time.
		"--retry-base", "200ms", "--retry-max", "2s", "--max-attempts", "8", "--attempt-timeout", "2s",
		"--breaker-pause", "2s", "--breaker-max-pause", "8s",
		"--log-level", h.cfg.LogLevel, "--log-format", "json",
	}
	args = append(args, h.cfg.LanewayArgs...)
	return append(args, h.sc.Flags...)
}

// keyFile is the run's secrets key file, shared by its instances.
func (h *Harness) keyFile() string { return filepath.Join(h.dir, "secrets.key") }

func (h *Harness) setup(ctx context.Context, n int) error {
	var err error
	if _, _, err = secretbox.EnsureKeyFile(h.keyFile()); err != nil {
		return err
	}
	if h.recv, err = NewReceivers(filepath.Join(h.dir, "receipts.ndjson"), filepath.Join(h.dir, "requests.ndjson")); err != nil {
		return err
	}
	for range n {
		if _, err := h.newInstance(); err != nil {
			return err
		}
	}
	// The first instance creates the topics; the others start alongside.
	if err := h.instances[0].Start(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 1; i < n; i++ {
		wg.Go(func() { errs[i] = h.instances[i].Start(ctx) })
	}
	wg.Wait()
	if err := joinErrs(errs...); err != nil {
		return err
	}
	if h.admin, err = kgo.NewClient(kgo.SeedBrokers(h.env.Brokers...)); err != nil {
		return err
	}
	if err := h.createEndpoints(ctx); err != nil {
		return err
	}
	if err := h.waitGroups(ctx, n); err != nil {
		return err
	}
	h.pub, err = NewPublisher(h.env.Brokers, h.name+".events", h.name, h.cfg.Entities, h.tenants(), h.cfg.Seed,
		filepath.Join(h.dir, "accepted.ndjson"))
	if err == nil && h.sc.StatesOnly {
		h.pub.StatesOnly()
	}
	return err
}

// tenants is how many tenants the load is spread over (t0, t1, ...).
func (h *Harness) tenants() int {
	if h.sc.Tenants > 0 {
		return h.sc.Tenants
	}
	return 2
}

// newInstance adds an instance, not started yet, with the next index.
func (h *Harness) newInstance() (*Instance, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := len(h.instances)
	id := fmt.Sprintf("%s-%d", h.name, i)
	in := &Instance{ID: id, Addr: addr, bin: h.cfg.Bin, args: h.lanewayArgs(id, addr),
		logPath: filepath.Join(h.dir, fmt.Sprintf("laneway-%d.log", i))}
	h.instances = append(h.instances, in)
	return in, nil
}

// addInstance starts one more instance (it joins the groups: a rebalance)
// and waits until it is ready.
func (h *Harness) addInstance(ctx context.Context) (*Instance, error) {
	in, err := h.newInstance()
	if err != nil {
		return nil, err
	}
	return in, in.Start(ctx)
}

// waitGroups waits until the fan-out and delivery groups are stable with n
// members that each own partitions.
func (h *Harness) waitGroups(ctx context.Context, n int) error {
	return WaitGroups(ctx, kadm.NewClient(h.admin), h.name, n)
}

// WaitGroups waits until the fan-out and delivery groups of the run whose
// group prefix is prefix are stable with n members that each own
// partitions, and every partition of the topics they subscribe is assigned:
// a rebalance is over and every instance works. The last condition matters
// because the groups balance cooperatively: between the round that revokes
// moving partitions and the round that hands them out, a group is Stable
// with those partitions owned by nobody, for as long as the revoking owner
// takes to release them.
func WaitGroups(ctx context.Context, adm *kadm.Client, prefix string, n int) error {
	g := topics.GroupsFor(prefix)
	groups := []string{g.Fanout, g.Deliveries}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		last := groupsSettled(reqCtx, adm, groups, n)
		cancel()
		if last == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("groups not stable with %d members: %s", n, last)
		}
		if !timing.Sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// groupsSettled returns "" when each of groups is Stable with n members
// that each own partitions and every partition of its topics is assigned,
// and otherwise what is not yet so.
func groupsSettled(ctx context.Context, adm *kadm.Client, groups []string, n int) string {
	described, err := adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return err.Error()
	}
	for _, name := range groups {
		d := described[name]
		owning := 0
		for _, m := range d.Members {
			if c, ok := m.Assigned.AsConsumer(); ok && slices.ContainsFunc(c.Topics, func(tp kmsg.ConsumerMemberAssignmentTopic) bool {
				return len(tp.Partitions) > 0
			}) {
				owning++
			}
		}
		if d.State != "Stable" || len(d.Members) != n || owning != n {
			return fmt.Sprintf("group %s: state %s, %d members, %d owning partitions", name, d.State, len(d.Members), owning)
		}
		if missing, err := unassigned(ctx, adm, &d); err != nil || missing != "" {
			return fmt.Sprintf("group %s: %s%v", name, missing, err)
		}
	}
	return ""
}

// unassigned names the partitions of the topics group's members subscribe
// that no member is assigned ("" when there are none).
func unassigned(ctx context.Context, adm *kadm.Client, group *kadm.DescribedGroup) (string, error) {
	subscribed := group.JoinTopics()
	if len(subscribed) == 0 { // ListTopics of none lists every topic
		return "no member subscribes a topic", nil
	}
	details, err := adm.ListTopics(ctx, subscribed...)
	if err != nil {
		return "", err
	}
	assigned := group.AssignedPartitions()
	var missing []string
	details.EachPartition(func(p kadm.PartitionDetail) {
		if _, ok := assigned[p.Topic][p.Partition]; !ok {
			missing = append(missing, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
		}
	})
	if len(missing) == 0 {
		return "", nil
	}
	return fmt.Sprintf("partitions owned by nobody: %v", missing), nil
}

// monitor restarts instances that exit by themselves, as a supervisor
// would, and records them: an exit nobody asked for is worth reporting.
func (h *Harness) monitor(ctx context.Context) {
	timing.Every(ctx.Done(), 200*time.Millisecond, func() {
		for _, in := range h.instanceList() {
			err := in.Exited()
			if err == nil {
				continue
			}
			h.mu.Lock()
			h.selfExits = append(h.selfExits, fmt.Sprintf("%s: %v", time.Now().UTC().Format(time.RFC3339Nano), err))
			h.mu.Unlock()
			h.cfg.logf("%s: %v; restarting it", h.sc.Name, err)
			if err := in.Start(ctx); err != nil {
				h.cfg.logf("%s: restart failed: %v", h.sc.Name, err)
			}
		}
	})
}

// stopInstances stops every instance at once, each given a minute to shut
// down cleanly, and takes the receivers' stats once nothing delivers any more.
func (h *Harness) stopInstances() error {
	var wg sync.WaitGroup
	instances := h.instanceList()
	errs := make([]error, len(instances))
	for i, in := range instances {
		wg.Go(func() { errs[i] = in.Stop(time.Minute) })
	}
	wg.Wait()
	if h.recv != nil {
		h.recvStats = h.recv.Stats()
	}
	return joinErrs(errs...)
}

// cleanup stops whatever is still running (after a harness error).
func (h *Harness) cleanup() {
	for _, in := range h.instanceList() {
		_ = in.Kill()
	}
	if h.recv != nil {
		_ = h.recv.Close()
	}
	if h.pub != nil {
		_ = h.pub.Close()
	}
	if h.admin != nil {
		h.admin.Close()
	}
}
