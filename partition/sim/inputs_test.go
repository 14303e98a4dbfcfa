package sim

import (
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/endpoint"
)

// The owner's late view of the endpoint store: a change reaches it
// configLag after it was made, not before, and a deletion too.
func TestLaggedConfigShowsAChangeOnlyConfigLagLater(t *testing.T) {
	s := policySim()
	s.endpoints = endpoints{}
	s.p.configLag = time.Second
	s.endpoints["ep"] = endpoint.Endpoint{ID: "ep", Status: endpoint.StatusActive}
	s.configChanged("ep")
	s.now = s.now.Add(10 * time.Second)
	s.endpoints["ep"] = endpoint.Endpoint{ID: "ep", Status: endpoint.StatusActive, Paused: true}
	s.configChanged("ep")
	view := s.configView()
	if ep, _ := view.Get("ep"); ep.Paused {
		t.Fatal("the pause reached the owner at once, not configLag later")
	}
	s.now = s.now.Add(time.Second)
	if ep, _ := view.Get("ep"); !ep.Paused {
		t.Fatal("the pause has not reached the owner configLag later")
	}
	delete(s.endpoints, "ep")
	s.configChanged("ep")
	if _, ok := view.Get("ep"); !ok {
		t.Fatal("the deletion reached the owner at once")
	}
	s.now = s.now.Add(time.Second)
	if _, ok := view.Get("ep"); ok {
		t.Fatal("the deletion has not reached the owner configLag later")
	}
}
