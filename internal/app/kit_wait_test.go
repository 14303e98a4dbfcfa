package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/testkit/fleet"
)

// waitForTotal waits until the fleet has accepted want deliveries.
func waitForTotal(t *testing.T, f *fleet.Fleet, want int64, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for f.Total() < want {
		select {
		case <-f.Changed():
		case <-deadline.C:
			t.Fatalf("only %d of %d deliveries arrived within %s", f.Total(), want, timeout)
		}
	}
}

// waitUntil waits for cond, re-checking whenever the fleet accepts a delivery.
func waitUntil(t *testing.T, f *fleet.Fleet, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-f.Changed():
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// waitEndpoint waits until the store's endpoint id satisfies ok.
func waitEndpoint(t *testing.T, s *endpoint.Store, id string, ok func(endpoint.Endpoint) bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		changed := s.Changed()
		if e, found := s.Get(id); found && ok(e) {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			e, _ := s.Get(id)
			t.Fatalf("endpoint %s never reached the expected state; now %+v", id, e)
		}
	}
}

// waitForEndpointStatus waits until a's store holds endpoint id with status want.
func waitForEndpointStatus(t *testing.T, a *app.App, id, want string) {
	t.Helper()
	waitEndpoint(t, a.Endpoints(), id, func(e endpoint.Endpoint) bool { return e.Status == want })
}

// series returns the series of metric name in a's registry.
func series(t *testing.T, a *app.App, name string) []*dto.Metric {
	t.Helper()
	families, err := a.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// counterSum adds up every series of a counter in the app's registry.
func counterSum(t *testing.T, a *app.App, name string) float64 {
	t.Helper()
	sum := 0.0
	for _, m := range series(t, a, name) {
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// endpointGauge returns the value of the series of gauge name labelled with
// endpoint id in a's registry, and whether a reports one (only the owner of
// the endpoint's partition does).
func endpointGauge(t *testing.T, a *app.App, name, id string) (float64, bool) {
	t.Helper()
	for _, m := range series(t, a, name) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "endpoint" && l.GetValue() == id {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// waitForGroupMembers waits until group is stable with n members that each
// own at least one partition.
func waitForGroupMembers(t *testing.T, brokers []string, group string, n int) {
	t.Helper()
	waitForGroup(t, brokers, group, time.Minute, func(g kadm.DescribedGroup) (bool, string) {
		owning := 0
		for _, m := range g.Members {
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, tp := range c.Topics {
					if len(tp.Partitions) > 0 {
						owning++
						break
					}
				}
			}
		}
		return g.State == "Stable" && len(g.Members) == n && owning == n,
			fmt.Sprintf("state %s, %d members, %d owning partitions (want %d)", g.State, len(g.Members), owning, n)
	})
}

// waitForGroup describes group until ready accepts it, or fails the test
// after within with what ready said about the last description.
func waitForGroup(t *testing.T, brokers []string, group string, within time.Duration, ready func(kadm.DescribedGroup) (bool, string)) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(within)
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	last := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		described, err := adm.DescribeGroups(ctx, group)
		cancel()
		if err == nil {
			var ok bool
			if ok, last = ready(described[group]); ok {
				return
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not as wanted within %s: %s", group, within, last)
		}
		<-poll.C
	}
}
