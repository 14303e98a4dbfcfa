package topics_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestConfigTopicsForgetSupersededValuesWithinHours: the compacted config
// topics (which hold sealed secrets) are created with the settings that
// compact a replaced or deleted value away within hours.
func TestConfigTopicsForgetSupersededValuesWithinHours(t *testing.T) {
	bs := []testenv.Backend{testenv.Kfake(t)}
	if b, ok := testenv.RealKafka(); ok {
		bs = append(bs, b)
	}
	for _, b := range bs {
		t.Run(b.Name, func(t *testing.T) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := topics.Config{Partitions: 1}.WithPrefix(testenv.Unique("topics")).WithDefaults()
			if err := topics.Ensure(ctx, adm, c); err != nil {
				t.Fatal(err)
			}
			described, err := adm.DescribeTopicConfigs(ctx, c.Endpoints, c.Sources)
			if err != nil {
				t.Fatal(err)
			}
			for _, rc := range described {
				if rc.Err != nil {
					t.Fatalf("%s: %v", rc.Name, rc.Err)
				}
				got := map[string]string{}
				for _, cfg := range rc.Configs {
					got[cfg.Key] = cfg.MaybeValue()
				}
				for k, want := range topics.CompactedConfigs {
					if got[k] != want {
						t.Errorf("%s: %s = %q, want %q", rc.Name, k, got[k], want)
					}
				}
			}
		})
	}
}
