// Command kafkaready waits until a Kafka cluster really answers: a metadata
// request lists at least one broker, and optionally a consumer-group
// coordinator can be found (-group) and a transactional producer can init,
// produce and commit (-txn). It retries every step until -timeout.
//
// Used by scripts/testenv.sh; not part of the laneway binary.
//
//	go run ./internal/testkit/kafkaready -brokers 127.0.0.1:39092 -timeout 60s -group -txn
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const readyTopic = "laneway-testenv-ready"

func main() {
	def := os.Getenv("LANEWAY_TEST_KAFKA_BROKERS")
	if def == "" {
		def = "127.0.0.1:39092"
	}
	brokers := flag.String("brokers", def, "comma-separated seed brokers")
	timeout := flag.Duration("timeout", 60*time.Second, "overall deadline")
	group := flag.Bool("group", false, "also require a group coordinator (creates __consumer_offsets)")
	txn := flag.Bool("txn", false, "also run a transactional produce+commit (InitProducerID with a transactional id)")
	quiet := flag.Bool("q", false, "print only errors")
	flag.Parse()

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	seeds := strings.Split(*brokers, ",")
	logf := func(format string, args ...any) {
		if !*quiet {
			fmt.Printf("kafkaready: "+format+"\n", args...)
		}
	}
	fail := func(step string, err error) {
		fmt.Fprintf(os.Stderr, "kafkaready: %s: not ready after %s: %v\n", step, time.Since(start).Round(time.Millisecond), err)
		os.Exit(1)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DialTimeout(2*time.Second))
	if err != nil {
		fail("client", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	// 1. Metadata: at least one broker and a controller.
	err = retry(ctx, func(ctx context.Context) error {
		m, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		if len(m.Brokers) == 0 {
			return errors.New("metadata lists no brokers")
		}
		logf("metadata ok: cluster %s, %d broker(s), controller %d", m.Cluster, len(m.Brokers), m.Controller)
		return nil
	})
	if err != nil {
		fail("metadata", err)
	}

	// 2. Group coordinator (the broker creates __consumer_offsets on demand).
	if *group {
		err = retry(ctx, func(ctx context.Context) error {
			return adm.FindGroupCoordinators(ctx, "laneway-testenv-ready").Error()
		})
		if err != nil {
			fail("group coordinator", err)
		}
		logf("group coordinator ok")
	}

	// 3. Transactions: InitProducerID with a transactional id, produce, commit.
	if *txn {
		err = retry(ctx, func(ctx context.Context) error {
			return adm.FindTxnCoordinators(ctx, "laneway-testenv-ready").Error()
		})
		if err != nil {
			fail("txn coordinator", err)
		}
		err = retry(ctx, func(ctx context.Context) error {
			_, err := adm.CreateTopic(ctx, 1, 1, nil, readyTopic)
			if errors.Is(err, kerr.TopicAlreadyExists) {
				return nil
			}
			return err
		})
		if err != nil {
			fail("create topic", err)
		}
		err = retry(ctx, func(ctx context.Context) error { return txnProduce(ctx, seeds) })
		if err != nil {
			fail("transactional produce", err)
		}
		logf("transactional produce+commit ok")
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := adm.DeleteTopic(dctx, readyTopic); err != nil {
			logf("warning: delete %s: %v", readyTopic, err)
		}
		dcancel()
	}

	logf("ready in %s", time.Since(start).Round(time.Millisecond))
}

// txnProduce runs one transaction with a fresh transactional client, so a
// failed attempt cannot leave the client in an aborting state for the next.
func txnProduce(ctx context.Context, seeds []string) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.DialTimeout(2*time.Second),
		kgo.TransactionalID(fmt.Sprintf("laneway-testenv-ready-%d", os.Getpid())),
		kgo.TransactionTimeout(10*time.Second),
		kgo.DefaultProduceTopic(readyTopic),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("ready")).FirstErr(); err != nil {
		_ = cl.EndTransaction(context.Background(), kgo.TryAbort)
		return fmt.Errorf("produce: %w", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// retry calls fn with a short per-attempt deadline until it succeeds or ctx
// expires, returning the last error.
func retry(ctx context.Context, fn func(context.Context) error) error {
	var last error
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return last
		case <-time.After(250 * time.Millisecond):
		}
	}
}
