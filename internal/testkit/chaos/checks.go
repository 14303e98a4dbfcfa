package chaos

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/testkit/ordercheck"
)

// CheckedFiles is the checker's input as read back and its report.
type CheckedFiles struct {
	Input  ordercheck.Input
	Report ordercheck.Report
}

// CheckFiles runs the order checker on a scenario directory's accepted log,
// endpoints file and receipt log, and on the dead-letter topic, exactly as
// cmd/laneway-checkorder does, and writes check.json.
func CheckFiles(ctx context.Context, dir string, brokers []string, deadTopic string) (CheckedFiles, error) {
	var in ordercheck.Input
	var err error
	if in.Accepted, err = ordercheck.ReadFile[ordercheck.Accepted](filepath.Join(dir, "accepted.ndjson")); err != nil {
		return CheckedFiles{}, err
	}
	if in.Endpoints, err = ordercheck.ReadEndpoints(filepath.Join(dir, "endpoints.json")); err != nil {
		return CheckedFiles{}, err
	}
	if in.Receipts, err = ordercheck.ReadFile[ordercheck.Receipt](filepath.Join(dir, "receipts.ndjson")); err != nil {
		return CheckedFiles{}, err
	}
	if _, statErr := os.Stat(filepath.Join(dir, "requests.ndjson")); statErr == nil {
		if in.Requests, err = ordercheck.ReadFile[ordercheck.Receipt](filepath.Join(dir, "requests.ndjson")); err != nil {
			return CheckedFiles{}, err
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return CheckedFiles{}, err
	}
	defer cl.Close()
	readCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if in.Dead, err = ordercheck.ReadDeadTopic(readCtx, cl, deadTopic); err != nil {
		return CheckedFiles{}, err
	}
	rep := ordercheck.Check(in)
	return CheckedFiles{Input: in, Report: rep}, writeJSON(filepath.Join(dir, "check.json"), rep)
}

// writeJSON writes v as indented JSON, for people reading a run's directory.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// drain waits until every accepted event is handled for every subscribed
// endpoint (the checker finds nothing lost on what the harness holds in
// memory), or the drain deadline, or until nothing outstanding has been
// handled for Config.StallTimeout (a stuck pipeline: waiting longer only
// costs time).
func (h *Harness) drain(ctx context.Context) bool {
	deadline := time.Now().Add(h.cfg.DrainTimeout)
	accepted := h.pub.Accepted()
	var subs []ordercheck.Endpoint
	for _, ep := range h.eps {
		subs = append(subs, ordercheck.Endpoint{ID: ep.id, Name: ep.spec.Name, Tenant: ep.spec.Tenant, EventTypes: ep.spec.EventTypes})
	}
	lastLog, progressAt, outstanding := time.Now(), time.Now(), -1
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		dead, err := ordercheck.ReadDeadTopic(readCtx, h.admin, h.name+".dead")
		cancel()
		if err == nil {
			rep := ordercheck.Check(ordercheck.Input{Accepted: accepted, Endpoints: subs, Receipts: h.recv.Receipts(), Dead: dead})
			if rep.Lost == 0 {
				return true
			}
			if outstanding < 0 || rep.Lost < outstanding {
				progressAt = time.Now()
			}
			outstanding = rep.Lost
			if time.Since(lastLog) > 10*time.Second {
				h.cfg.logf("%s: draining: %d of %d deliveries outstanding", h.sc.Name, rep.Lost, rep.Expected)
				lastLog = time.Now()
			}
			if h.cfg.StallTimeout > 0 && time.Since(progressAt) > h.cfg.StallTimeout {
				h.cfg.logf("%s: draining: no progress for %v with %d deliveries outstanding; giving up", h.sc.Name,
					h.cfg.StallTimeout, rep.Lost)
				return false
			}
		} else {
			h.cfg.logf("%s: draining: reading dead letters: %v", h.sc.Name, err)
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-poll.C:
		}
	}
}
