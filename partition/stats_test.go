package partition

import (
	"testing"
	"time"
)

func TestOutcomeWindowCountsTheLastMinute(t *testing.T) {
	var w outcomeWindow
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 120 { // one delivered per second for two minutes
		w.add(kindDelivered, start.Add(time.Duration(i)*time.Second))
	}
	w.add(kindFailed, start.Add(119*time.Second))
	w.add(kindDead, start.Add(30*time.Second)) // over a minute ago at the end
	pm, recent := w.perMinute(start.Add(119 * time.Second))
	if !recent || pm.Delivered < 55 || pm.Delivered > 60 || pm.Failed != 1 || pm.Dead != 0 {
		t.Fatalf("per minute %+v (recent %v): want ~60 delivered (bucket granularity), 1 failed, the old dead gone", pm, recent)
	}
	if pm, recent := w.perMinute(start.Add(10 * time.Minute)); recent || pm.Delivered != 0 {
		t.Fatalf("ten minutes later: %+v, recent %v; want nothing", pm, recent)
	}
}
