package topics

import (
	"slices"
	"testing"
)

func TestGroupsFor(t *testing.T) {
	g := GroupsFor("lw")
	want := Groups{Fanout: "lw-fanout", Deliveries: "lw-deliveries", Parked: "lw-deliveries-parked", Inbound: "lw-inbound", Feed: "lw-feed", Batch: "lw-batch"}
	if g != want {
		t.Fatalf("GroupsFor = %+v, want %+v", g, want)
	}
	if !slices.Equal(g.All(), []string{"lw-fanout", "lw-deliveries", "lw-inbound", "lw-deliveries-parked", "lw-feed", "lw-batch"}) {
		t.Fatalf("All = %v", g.All())
	}
}

// TestDefaultNamesAreStable pins the names a Laneway with no prefixes set
// uses: running deployments' topics and groups hold their data and offsets.
func TestDefaultNamesAreStable(t *testing.T) {
	g := GroupsFor(DefaultPrefix)
	want := Groups{
		Fanout: "laneway-fanout", Deliveries: "laneway-deliveries", Parked: "laneway-deliveries-parked",
		Inbound: "laneway-inbound", Feed: "laneway-feed", Batch: "laneway-batch",
	}
	if g != want {
		t.Errorf("GroupsFor(DefaultPrefix) = %+v, want %+v", g, want)
	}
	if p := ParkedGroup("custom"); p != "custom-parked" {
		t.Errorf("ParkedGroup(custom) = %q", p)
	}
	c := Config{}.WithDefaults()
	names := Config{
		Events: "laneway.events", Deliveries: "laneway.deliveries", Parked: "laneway.parked", Dead: "laneway.dead",
		Endpoints: "laneway.endpoints", Inbound: "laneway.inbound", Sources: "laneway.sources",
		FeedPrefix: "laneway.feed.", BatchPrefix: "laneway.batch.",
	}
	c.Partitions, c.ReplicationFactor = 0, 0
	c.EventsRetention, c.DeliveriesRetention, c.DeadRetention, c.InboundRetention, c.FeedRetention = 0, 0, 0, 0, 0
	if c != names {
		t.Errorf("Config{}.WithDefaults() names = %+v, want %+v", c, names)
	}
}
