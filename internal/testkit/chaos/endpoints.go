package chaos

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/testkit/ordercheck"
)

// endpointSpec is one endpoint of the receiver fleet.
type endpointSpec struct {
	Name           string
	Tenant         string
	EventTypes     []string
	MaxConcurrency int
	// Slow answers after a delay that gives the endpoint slowCapacity
	// times the capacity its share of the load needs: it keeps up in steady
	// state, barely, and falls behind and is parked whenever a fault stalls
	// it (or a burst comes).
	Slow bool
	// Delay is how long a healthy answer waits (when not Slow).
	Delay time.Duration
}

// fleetSpec is the receiver fleet every scenario runs with. Entities of
// tenant t0 go to fast-a, fast-b (state events only) and flappy; those of
// t1 to fast-c and slow.
var fleetSpec = []endpointSpec{
	{Name: "fast-a", Tenant: "t0", MaxConcurrency: 8},
	{Name: "fast-b", Tenant: "t0", EventTypes: []string{TypeState}, MaxConcurrency: 4},
	{Name: "fast-c", Tenant: "t1", MaxConcurrency: 4},
	{Name: "slow", Tenant: "t1", MaxConcurrency: 2, Slow: true},
	{Name: "flappy", Tenant: "t0", MaxConcurrency: 4},
}

// slowCapacity is the slow endpoint's capacity over its share of the load.
const slowCapacity = 1.1

// fleet is the scenario's receiver fleet.
func (h *Harness) fleet() []endpointSpec {
	if h.sc.Fleet != nil {
		return h.sc.Fleet
	}
	return fleetSpec
}

type runEndpoint struct {
	spec endpointSpec
	id   string
	recv *recvEndpoint
}

func (h *Harness) endpoint(name string) *recvEndpoint { return h.runEndpoint(name).recv }

func (h *Harness) runEndpoint(name string) *runEndpoint {
	for _, ep := range h.eps {
		if ep.spec.Name == name {
			return ep
		}
	}
	panic("no endpoint " + name)
}

// createEndpoints creates the fleet through the first instance's API,
// writes endpoints.json and waits until every instance knows every endpoint
// (an instance that does not would fan events out to fewer endpoints).
func (h *Harness) createEndpoints(ctx context.Context) error {
	first, err := instanceAPI(h.instances[0], client.DefaultTimeout)
	if err != nil {
		return err
	}
	var subs []ordercheck.Endpoint
	for _, spec := range h.fleet() {
		delay := spec.Delay
		if spec.Slow {
			// The endpoint's share of the load is a tenant's.
			delay = time.Duration(float64(spec.MaxConcurrency) / (slowCapacity * h.cfg.Rate / float64(h.tenants())) * float64(time.Second))
		}
		rep, url, err := h.recv.Add(spec.Name, delay)
		if err != nil {
			return err
		}
		body := map[string]any{"tenant": spec.Tenant, "url": url, "event_types": spec.EventTypes,
			"max_concurrency": spec.MaxConcurrency}
		var created struct{ ID, Secret string }
		if _, err := first.Call(ctx, http.MethodPost, "/v1/endpoints", nil, body, nil, &created); err != nil {
			return fmt.Errorf("create endpoint %s: %w", spec.Name, err)
		}
		if err := rep.SetEndpoint(created.ID, created.Secret); err != nil {
			return err
		}
		h.eps = append(h.eps, &runEndpoint{spec: spec, id: created.ID, recv: rep})
		subs = append(subs, ordercheck.Endpoint{ID: created.ID, Name: spec.Name, Tenant: spec.Tenant, EventTypes: spec.EventTypes})
	}
	if err := writeJSON(filepath.Join(h.dir, "endpoints.json"), subs); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for _, in := range h.instanceList() {
		api, err := instanceAPI(in, client.DefaultTimeout)
		if err != nil {
			return err
		}
		for _, ep := range h.eps {
			for {
				_, err := api.GetEndpoint(ctx, ep.id)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("instance %s does not know endpoint %s: %w", in.ID, ep.id, err)
				}
				if !timing.Sleep(ctx, 50*time.Millisecond) {
					return ctx.Err()
				}
			}
		}
	}
	return nil
}

// instanceAPI is a client of instance in's API, each request bounded by
// timeout. It has no token: the harness's instances have no admin token.
func instanceAPI(in *Instance, timeout time.Duration) (*client.Client, error) {
	return client.New(in.Addr, "", client.WithTimeout(timeout))
}

// namesToIDs maps endpoint names to their IDs, leaving out names the
// run's fleet does not have.
func namesToIDs(ids map[string]string, names []string) []string {
	var out []string
	for _, n := range names {
		if id, ok := ids[n]; ok {
			out = append(out, id)
		}
	}
	return out
}
