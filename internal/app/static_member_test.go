package app_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestInstancesAreStaticMembersAndLeaveOnStop checks both halves of the
// group membership: instances join the fan-out and delivery groups as
// static members named by their instance id (so a crashed instance that
// restarts takes its old place without a rebalance), and a graceful stop
// still takes the instance out of both groups at once. The session timeout
// is Kafka's 45 s default, so an instance that did not leave would still be
// a member long after the deadline below.
func TestInstancesAreStaticMembersAndLeaveOnStop(t *testing.T) {
	backends := testenv.Kafkas(t)
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			ns := testenv.Unique("static")
			shared := func(id string) func(*app.Config) {
				return func(c *app.Config) { shareCluster(c, ns, id) }
			}
			first := startApp(t, b, shared("a"))
			startApp(t, b, shared("b"))
			g := topics.GroupsFor(ns)
			groups := []string{g.Fanout, g.Deliveries}
			for _, g := range groups {
				waitForInstances(t, first.Brokers(), g, 30*time.Second, ns+"-a", ns+"-b")
			}
			brokers := first.Brokers()
			stopApp(t, first)
			for _, g := range groups {
				waitForInstances(t, brokers, g, 15*time.Second, ns+"-b")
			}
		})
	}
}

// waitForInstances waits until group is stable and its members are exactly
// the static members named want.
func waitForInstances(t *testing.T, brokers []string, group string, within time.Duration, want ...string) {
	t.Helper()
	waitForGroup(t, brokers, group, within, func(g kadm.DescribedGroup) (bool, string) {
		var got []string
		for _, m := range g.Members {
			if m.InstanceID == nil {
				got = append(got, "dynamic:"+m.MemberID)
				continue
			}
			got = append(got, *m.InstanceID)
		}
		slices.Sort(got)
		return g.State == "Stable" && slices.Equal(got, want), fmt.Sprintf("state %s, members %v (want %v)", g.State, got, want)
	})
}
