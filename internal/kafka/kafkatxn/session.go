package kafkatxn

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/plumbing/timing"
)

// Session is a franz-go GroupTransactSession that survives what broker
// faults do to one: it is fenced and settled at start, rebuilt after a
// failed transaction, checks that every commit's markers landed, and closes
// its producer's hanging transactions. It is not
// safe for concurrent use: one consume-transform-produce loop owns it.
type Session struct {
	opts   []kgo.Opt
	repair RepairConfig
	logger *slog.Logger

	sess *kgo.GroupTransactSession
	rep  *Repair

	cancel context.CancelFunc // ends the loop Run started
	done   chan struct{}      // closed when that loop has returned
}

// NewSession builds the session from opts (which must name the
// transactional id and the group). repair configures the hanging
// transaction repair; its Client is filled in here.
func NewSession(opts []kgo.Opt, repair RepairConfig) (*Session, error) {
	s := &Session{opts: opts, repair: repair, logger: repair.Logger}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.repair.Checks == nil { // one for every repair the session builds: each check is told of once
		s.repair.Checks = NewChecks(nil, repair.TransactionalID, s.logger)
	}
	if err := s.build(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Session) build() error {
	sess, err := kgo.NewGroupTransactSession(s.opts...)
	if err != nil {
		return err
	}
	s.sess = sess
	cfg := s.repair
	cfg.Client = sess.Client()
	s.rep = NewRepair(cfg)
	return nil
}

// Current is the session to poll, begin and end transactions with. It
// changes after Renew and MaybeRepair.
func (s *Session) Current() *kgo.GroupTransactSession { return s.sess }

// Run prepares the session and runs loop in a goroutine of its own until
// Stop: the one shape of Laneway's transactional stages (the fan-out, the
// inbound verify stage). loop must return once its ctx ends, having
// finished its current transaction.
func (s *Session) Run(loop func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		s.prepare(ctx)
		loop(ctx)
	}()
}

// Stop ends the loop Run started, waits for it however long its current
// transaction takes to end, and closes the client (a static member does not
// leave). It may be called without Run.
func (s *Session) Stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	s.close()
}

// prepare readies the session before the loop consumes anything: it fences
// a crashed predecessor's open transaction (InitProducerId aborts it at
// once, instead of after the transaction timeout, during which the
// partitions it wrote to and its offset commits would block every
// read_committed reader) and settles what the predecessor's last commit
// left open if the coordinator skipped its markers (Repair.Settle).
func (s *Session) prepare(ctx context.Context) {
	s.fence(ctx)
	if s.rep.Settle(ctx) {
		s.rebuild(ctx)
	}
}

func (s *Session) fence(ctx context.Context) {
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, _, err := s.sess.Client().ProducerID(fctx); err != nil && ctx.Err() == nil {
		s.logger.Warn("could not initialise the transactional producer yet", "txn_id", s.repair.TransactionalID, "err", err)
	}
}

// Renew replaces the session after a failed transaction. franz-go
// documents no error of End as retryable, and after some (the broker
// unreachable while ending) the client stays inside the transaction, so
// every later Begin would fail and the loop would never produce again. A
// new client with the same transactional id fences the old transaction
// (aborting it) and rejoins the group at the committed offsets, so the
// input of the failed transaction is consumed again: nothing is lost. The
// failed transaction may have committed after all with its markers
// skipped, so the new session settles first, as at Start.
func (s *Session) Renew(ctx context.Context) {
	s.rebuild(ctx)
	if s.rep.Settle(ctx) {
		s.rebuild(ctx)
	}
}

// rebuild closes the session and builds and fences a new one.
func (s *Session) rebuild(ctx context.Context) {
	s.sess.Close()
	s.sess = nil // only the loop and its Close use it; the loop ends if ctx does
	for ctx.Err() == nil {
		err := s.build()
		if err == nil {
			s.fence(ctx)
			return
		}
		s.logger.Error("could not build a new transactional session; retrying", "txn_id", s.repair.TransactionalID, "err", err)
		timing.Sleep(ctx, time.Second) // the loop sees ctx end
	}
}

// MaybeRepair runs the hanging-transaction check when it is due, and
// renews the session after a repair. Call it between transactions only.
func (s *Session) MaybeRepair(ctx context.Context) {
	if s.rep.Maybe(ctx) {
		s.rebuild(ctx)
	}
}

// Landed waits until the transaction that just committed has its markers
// on every partition in written, and commits it again where the coordinator
// skipped them (see Repair.Landed), renewing the session after that. Call
// it after every commit, before the next transaction begins.
func (s *Session) Landed(ctx context.Context, written kadm.TopicsSet) {
	if s.rep.Landed(ctx, written) {
		s.rebuild(ctx)
	}
}

// Written is the set of partitions recs were produced to, for Landed. The
// partitions are set by the partitioner before the send, so it must be
// called after the records' promises have run.
func Written(recs []*kgo.Record) kadm.TopicsSet {
	written := kadm.TopicsSet{}
	for _, r := range recs {
		written.Add(r.Topic, r.Partition)
	}
	return written
}

// RepairInterval is how often MaybeRepair checks: the longest a poll of a
// loop that calls it should block.
func (s *Session) RepairInterval() time.Duration { return s.rep.cfg.Every }

func (s *Session) close() {
	if s.sess != nil {
		s.sess.Close()
	}
}
