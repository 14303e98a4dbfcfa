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
