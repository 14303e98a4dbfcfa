package ordercheck

// Check and its steps, in the order it takes them.

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

type pairKey struct{ endpoint, event string }

type entityKey struct{ endpoint, entity string }

// Check applies the definitions in the package comment.
func Check(in Input) Report {
	c := newChecker(in)
	c.countAccepted()
	c.rep.OutOfOrderInLog = acceptedDisorder(in.Accepted, &c.rep)
	c.readReceipts()
	c.readDeadLetters()
	c.noteStarts()
	c.rep.Requests = len(in.Requests)
	c.rep.overlaps(in.Requests)
	c.classifyEvents()
	c.tallyPairs()
	return c.rep
}

// checker is one run of Check: the input, the report so far and what the
// steps learn for the later ones, so that each step is a short method.
type checker struct {
	in        Input
	rep       Report
	known     map[string]int        // event id -> index in Accepted
	endpoints map[string]Endpoint   // by id
	delivered map[pairKey]int       // receipts per (endpoint, event)
	dead      map[pairKey]bool      // dead-lettered with a reason
	started   map[pairKey]time.Time // first request, else first receipt
	outcome   [][]outcomeKind       // [endpoint][event index]
	blocker   map[pairKey]string    // why a lost state's newer handled revisions do not cover it
}

func newChecker(in Input) *checker {
	c := &checker{
		in:        in,
		rep:       Report{PerEndpoint: map[string]*EndpointFigures{}},
		known:     make(map[string]int, len(in.Accepted)),
		endpoints: map[string]Endpoint{},
		delivered: map[pairKey]int{},
		dead:      map[pairKey]bool{},
		started:   map[pairKey]time.Time{},
		outcome:   make([][]outcomeKind, len(in.Endpoints)),
		blocker:   map[pairKey]string{},
	}
	for _, ep := range in.Endpoints {
		c.rep.PerEndpoint[ep.ID] = &EndpointFigures{Name: ep.Name}
		c.endpoints[ep.ID] = ep
	}
	return c
}

// countAccepted indexes the accepted events and counts them, those with an
// unknown outcome apart.
func (c *checker) countAccepted() {
	for i, e := range c.in.Accepted {
		c.known[e.ID] = i
		if e.Err != "" {
			c.rep.Unacked++
		} else {
			c.rep.Events++
		}
	}
}

// readReceipts checks the receipts for duplicates, routing, payload, and
// first-delivery order per (endpoint, entity), in arrival order.
func (c *checker) readReceipts() {
	receipts := slices.Clone(c.in.Receipts)
	slices.SortStableFunc(receipts, func(a, b Receipt) int {
		return cmp.Or(cmp.Compare(a.Endpoint, b.Endpoint), cmp.Compare(a.Seq, b.Seq))
	})
	c.rep.Receipts = len(receipts)
	highest := map[entityKey]int64{} // highest revision first delivered so far
	for _, r := range receipts {
		if c.isDuplicate(r) {
			continue
		}
		c.checkRouting(r)
		c.checkOrder(r, highest)
	}
}

// isDuplicate counts r's delivery and reports whether its (endpoint, event)
// was delivered before: only a first delivery is checked further.
func (c *checker) isDuplicate(r Receipt) bool {
	k := pairKey{r.Endpoint, r.EventID}
	c.delivered[k]++
	fig := c.rep.figures(r.Endpoint)
	if c.delivered[k] == 1 {
		return false
	}
	c.rep.Duplicates++
	fig.Duplicates++
	if c.delivered[k] == 2 {
		c.rep.DuplicatedPairs++
	}
	return true
}

// checkRouting counts a receipt of an unknown event, at an endpoint not
// subscribed to it, or whose entity or revision differ from the event's.
func (c *checker) checkRouting(r Receipt) {
	i, isKnown := c.known[r.EventID]
	ep, isEndpoint := c.endpoints[r.Endpoint]
	switch {
	case !isKnown:
		c.rep.Misrouted++
		c.rep.other("receipt of unknown event %s at endpoint %s", r.EventID, r.Endpoint)
	case !isEndpoint || !ep.Subscribes(c.in.Accepted[i]):
		c.rep.Misrouted++
		c.rep.other("event %s delivered to endpoint %s, which is not subscribed to it", r.EventID, r.Endpoint)
	}
	if isKnown && (c.in.Accepted[i].Entity != r.Entity || c.in.Accepted[i].Revision != r.Revision) {
		c.rep.Mismatched++
		c.rep.other("event %s arrived at %s as %s rev %d, published as %s rev %d",
			r.EventID, r.Endpoint, r.Entity, r.Revision, c.in.Accepted[i].Entity, c.in.Accepted[i].Revision)
	}
}

// checkOrder counts a first delivery of a revision below one already first
// delivered to its (endpoint, entity), and raises highest.
func (c *checker) checkOrder(r Receipt, highest map[entityKey]int64) {
	ek := entityKey{r.Endpoint, r.Entity}
	top, seen := highest[ek]
	if seen && r.Revision < top {
		c.rep.OrderViolations++
		c.rep.figures(r.Endpoint).OrderViolations++
		if len(c.rep.ViolationSamples) < MaxSamples {
			c.rep.ViolationSamples = append(c.rep.ViolationSamples, fmt.Sprintf(
				"endpoint %s entity %s: revision %d (event %s, receipt %d at %s) first delivered after revision %d",
				r.Endpoint, r.Entity, r.Revision, r.EventID, r.Seq, r.At.Format(time.RFC3339Nano), top))
		}
	}
	if !seen || r.Revision > top {
		highest[ek] = r.Revision
	}
}

// readDeadLetters notes the dead letters of this run's endpoints: one with
// a reason ends its pair; one without is reported and ends nothing.
func (c *checker) readDeadLetters() {
	for _, d := range c.in.Dead {
		if _, ours := c.endpoints[d.Endpoint]; !ours {
			continue
		}
		c.rep.DeadLetters++
		if d.Reason == "" {
			c.rep.DeadNoReason++
			c.rep.other("dead letter of event %s for endpoint %s has no reason", d.EventID, d.Endpoint)
			continue
		}
		c.dead[pairKey{d.Endpoint, d.EventID}] = true
	}
}

// noteStarts takes when each (endpoint, event) started: its first request,
// else its first receipt.
func (c *checker) noteStarts() {
	for _, r := range c.in.Receipts {
		c.noteStart(r)
	}
	for _, r := range c.in.Requests {
		c.noteStart(r)
	}
}

func (c *checker) noteStart(r Receipt) {
	k := pairKey{r.Endpoint, r.EventID}
	if t, ok := c.started[k]; !ok || r.At.Before(t) {
		c.started[k] = r.At
	}
}

// classifyEvents decides every revision's outcome per (endpoint, entity):
// delivered, dead, superseded (see coverage) or lost.
func (c *checker) classifyEvents() {
	byEntity := map[string][]int{} // entity -> indexes in Accepted, every event (acked or not)
	for i, e := range c.in.Accepted {
		byEntity[e.Entity] = append(byEntity[e.Entity], i)
	}
	for n, ep := range c.in.Endpoints {
		c.outcome[n] = make([]outcomeKind, len(c.in.Accepted))
		for _, idx := range byEntity {
			c.classifyStream(n, ep, c.stream(ep, idx))
		}
	}
}

// stream is the events of one entity (idx) that ep subscribes to, in
// revision order (then offset order).
func (c *checker) stream(ep Endpoint, idx []int) []int {
	var seq []int
	for _, i := range idx {
		if ep.Subscribes(c.in.Accepted[i]) {
			seq = append(seq, i)
		}
	}
	acc := c.in.Accepted
	slices.SortStableFunc(seq, func(a, b int) int {
		return cmp.Or(cmp.Compare(acc[a].Revision, acc[b].Revision), cmp.Compare(acc[a].Offset, acc[b].Offset))
	})
	return seq
}

// classifyStream sets the outcome, for the n-th endpoint ep, of each event
// of one (endpoint, entity) stream.
func (c *checker) classifyStream(n int, ep Endpoint, seq []int) {
	evs := make([]seqEvent, len(seq))
	for j, i := range seq {
		e := c.in.Accepted[i]
		k := pairKey{ep.ID, e.ID}
		evs[j] = seqEvent{rev: e.Revision, state: e.Coalesce, sentAt: e.SentAt, start: c.started[k],
			delivered: c.delivered[k] > 0, dead: c.dead[k]}
	}
	covered, why := coverage(evs)
	for j, i := range seq {
		switch {
		case evs[j].delivered:
			c.outcome[n][i] = outDelivered
		case evs[j].dead:
			c.outcome[n][i] = outDead
		case covered[j]:
			c.outcome[n][i] = outSuperseded
		default:
			c.outcome[n][i] = outLost
			if why[j] != "" {
				c.blocker[pairKey{ep.ID, c.in.Accepted[i].ID}] = why[j]
			}
		}
	}
}

// tallyPairs counts the outcome of every expected pair: each accepted
// event (its outcome known) for each endpoint subscribed to it.
func (c *checker) tallyPairs() {
	for i, e := range c.in.Accepted {
		if e.Err != "" {
			continue
		}
		for n, ep := range c.in.Endpoints {
			if ep.Subscribes(e) {
				c.tallyPair(c.outcome[n][i], ep, e)
			}
		}
	}
}

func (c *checker) tallyPair(out outcomeKind, ep Endpoint, e Accepted) {
	c.rep.Expected++
	fig := c.rep.figures(ep.ID)
	fig.Expected++
	k := pairKey{ep.ID, e.ID}
	switch out {
	case outDelivered:
		c.rep.Delivered++
		fig.Delivered++
		if c.dead[k] {
			c.rep.DeadDelivered++
		}
	case outDead:
		c.rep.DeadPairs++
		fig.Dead++
	case outSuperseded:
		c.rep.Superseded++
		fig.Superseded++
	default:
		c.rep.Lost++
		fig.Lost++
		c.sampleLost(ep, e)
	}
}

// sampleLost describes a lost pair, with what kept newer handled states
// from covering it when there were some.
func (c *checker) sampleLost(ep Endpoint, e Accepted) {
	if len(c.rep.LostSamples) >= MaxSamples {
		return
	}
	s := fmt.Sprintf("event %s (%s %s rev %d, coalesce %t, %d/%d, accepted %s) never reached endpoint %s",
		e.ID, e.Tenant, e.Entity, e.Revision, e.Coalesce, e.Partition, e.Offset,
		e.AckedAt.Format(time.RFC3339Nano), ep.ID)
	if why := c.blocker[pairKey{ep.ID, e.ID}]; why != "" {
		s += "; " + why
	}
	c.rep.LostSamples = append(c.rep.LostSamples, s)
}
