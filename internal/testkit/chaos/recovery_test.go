package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/testkit/ordercheck"
)

func TestRecovery(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	in := ordercheck.Input{Endpoints: []ordercheck.Endpoint{{ID: "A", Tenant: "t"}, {ID: "B", Tenant: "t"}}}
	// Event n is acked at n seconds, on entity e<n>, a fact.
	add := func(n int, state bool, entity string, deliveredAt float64, to ...string) {
		id := fmt.Sprintf("e%d", n)
		in.Accepted = append(in.Accepted, ordercheck.Accepted{ID: id, Tenant: "t", Type: "x", Entity: entity,
			Revision: int64(n), Coalesce: state, AckedAt: at(float64(n))})
		for _, ep := range to {
			in.Receipts = append(in.Receipts, ordercheck.Receipt{Endpoint: ep, EventID: id, At: at(deliveredAt)})
		}
	}
	add(1, false, "a", 1.1, "A", "B") // on time
	add(2, false, "b", 9, "A", "B")   // stalled by the fault at 3 until 9
	add(5, false, "c", 9.5, "A")      // overdue 6..9.5 at A; B only has it at 11 (after the next fault)
	in.Receipts = append(in.Receipts, ordercheck.Receipt{Endpoint: "B", EventID: "e5", At: at(11)})
	add(12, false, "d", 12.2, "A", "B") // on time after the second fault
	// A state event superseded: e13 never arrives at A, the newer e14 does at 14.1.
	add(13, true, "s", 0)
	add(14, true, "s", 14.1, "A", "B")
	in.Receipts = append(in.Receipts, ordercheck.Receipt{Endpoint: "B", EventID: "e13", At: at(13.2)})

	faults := []Fault{
		{At: at(3), Measure: []string{"A"}},
		{At: at(10), Measure: []string{"A", "B"}},
	}
	ids := map[string]string{"A": "A", "B": "B"}
	Recovery(faults, in, ids, time.Second, at(30))
	// Fault 1 (A only): e2 done at 9 (overdue since 3), e5 at 9.5 (since 6).
	if got, want := faults[0].Recovery, 6500*time.Millisecond; got != want || faults[0].Late != 2 {
		t.Errorf("fault 1: recovery %v late %d, want %v and 2", got, faults[0].Late, want)
	}
	// Fault 2 (A and B): e5 at B done at 11; e13 at A superseded at 14.1,
	// 13.1 s after it was acked: overdue from 14 to 14.1.
	if got, want := faults[1].Recovery, 4100*time.Millisecond; got != want || faults[1].Late != 2 {
		t.Errorf("fault 2: recovery %v late %d, want %v and 2", got, faults[1].Late, want)
	}
	if !faults[1].Recovered {
		t.Error("fault 2 not recovered")
	}
	// An event never delivered: the last fault is not recovered, and its
	// recovery runs to the end.
	add(20, false, "z", 0)
	Recovery(faults, in, ids, time.Second, at(30))
	if faults[1].Recovered || faults[1].Recovery != 20*time.Second || faults[1].Late != 4 {
		t.Errorf("fault 2 with a lost event: recovered %v, recovery %v, late %d", faults[1].Recovered, faults[1].Recovery, faults[1].Late)
	}
	in.Accepted = in.Accepted[:len(in.Accepted)-1]
	ls := Latencies(in, []string{"A"})
	if ls.Count != 6 || ls.Max != 7*time.Second {
		t.Errorf("latencies %+v", ls)
	}
}
