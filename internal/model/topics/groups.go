package topics

// Groups names the consumer groups of one Laneway, built from its group
// prefix (DefaultPrefix by default), in this one place: the stages, the
// instance's leave at shutdown, the tools and the docs' ACL table all
// read them from here.
type Groups struct {
	// Fanout is the fan-out stage's group; its transactional ids are
	// Fanout + "-" + instance id.
	Fanout string
	// Deliveries is the delivery stage's group.
	Deliveries string
	// Parked mirrors the parked partitions' progress for lag tools; it has
	// no members.
	Parked string
	// Inbound is the inbound verify stage's group; its transactional ids
	// are Inbound + "-" + instance id.
	Inbound string
	// Feed holds the acknowledged position of each pull endpoint's feed
	// (one offset per feed topic); it has no members.
	Feed string
	// Batch holds each batch endpoint's cursor: how far its feed was sent
	// (one offset per feed topic); it has no members.
	Batch string
}

// GroupsFor returns the groups of the Laneway whose group prefix is prefix.
// Running deployments' groups hold their offsets: the names must not change.
func GroupsFor(prefix string) Groups {
	deliveries := prefix + "-deliveries"
	return Groups{
		Fanout: prefix + "-fanout", Deliveries: deliveries,
		Parked: ParkedGroup(deliveries), Inbound: prefix + "-inbound",
		Feed: prefix + "-feed", Batch: prefix + "-batch",
	}
}

// ParkedGroup is the memberless group of the parked progress of the
// delivery stage whose group is deliveries.
func ParkedGroup(deliveries string) string { return deliveries + "-parked" }

// Members are the groups an instance joins as a static member.
func (g Groups) Members() []string { return []string{g.Fanout, g.Deliveries, g.Inbound} }

// All are every group, the memberless ones included.
func (g Groups) All() []string { return append(g.Members(), g.Parked, g.Feed, g.Batch) }
