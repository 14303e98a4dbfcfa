package topics

// Groups names the consumer groups of one Laneway, built from its group
// prefix ("laneway" by default), in this one place: the stages, the
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
func GroupsFor(prefix string) Groups {
	return Groups{
		Fanout: prefix + "-fanout", Deliveries: prefix + "-deliveries",
		Parked: prefix + "-deliveries-parked", Inbound: prefix + "-inbound",
		Feed: prefix + "-feed", Batch: prefix + "-batch",
	}
}

// Members are the groups an instance joins as a static member.
func (g Groups) Members() []string { return []string{g.Fanout, g.Deliveries, g.Inbound} }

// All are every group, the memberless ones included.
func (g Groups) All() []string { return append(g.Members(), g.Parked, g.Feed, g.Batch) }
