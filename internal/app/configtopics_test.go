package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestStartAlignsOlderConfigTopics: config topics an older Laneway created
// with Kafka's compaction defaults, under which a rotated-out secret stays
// on the topic for days, get the settings that forget it within hours when
// Laneway starts.
func TestStartAlignsOlderConfigTopics(t *testing.T) {
	bs := testenv.Kafkas(t)
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
			var tc topics.Config
			startApp(t, b, func(c *app.Config) {
				tc = c.Topics
				compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
				for _, name := range []string{tc.Endpoints, tc.Sources} {
					resp, err := adm.CreateTopic(ctx, 1, -1, compact, name)
					if err == nil {
						err = resp.Err
					}
					if err != nil {
						t.Fatalf("create %s as an older Laneway did: %v", name, err)
					}
				}
			})
			// Set as they must be, a second alignment finds nothing to do.
			altered, err := topics.AlignConfigTopics(ctx, adm, tc)
			if err != nil || len(altered) != 0 {
				t.Errorf("after start, the compaction settings of %v still differed from %v (err %v)", altered, topics.CompactedConfigs, err)
			}
		})
	}
}
