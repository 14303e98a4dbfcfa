package topics

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// AlignConfigTopics brings the compaction settings of the config topics
// (endpoints, sources) to CompactedConfigs when they differ: topics created
// by an older Laneway, or by hand, keep Kafka's defaults, under which a
// rotated-out or deleted secret lingers for days. cleanup.policy is left
// as it is: changing a topic's policy is the operator's call. It returns
// the topics it altered; its error names what failed (AlignCommand says
// how to do it by hand), and the topics stay usable whatever it says.
func AlignConfigTopics(ctx context.Context, adm *kadm.Client, c Config) ([]string, error) {
	c = c.WithDefaults()
	described, err := adm.DescribeTopicConfigs(ctx, c.Endpoints, c.Sources)
	if err != nil {
		return nil, fmt.Errorf("describe the configs of %s and %s: %w", c.Endpoints, c.Sources, err)
	}
	var altered []string
	for _, rc := range described {
		if rc.Err != nil {
			return altered, fmt.Errorf("describe the configs of %s: %w", rc.Name, rc.Err)
		}
		drift := compactionDrift(rc.Configs)
		if len(drift) == 0 {
			continue
		}
		resp, err := adm.AlterTopicConfigs(ctx, drift, rc.Name)
		if err == nil {
			var r kadm.AlterConfigsResponse
			if r, err = resp.On(rc.Name, nil); err == nil {
				err = r.Err
			}
		}
		if err != nil {
			return altered, fmt.Errorf("alter the compaction configs of %s: %w", rc.Name, err)
		}
		altered = append(altered, rc.Name)
	}
	return altered, nil
}

// compactionDrift is what must be set for configs to hold the compaction
// settings of CompactedConfigs, cleanup.policy aside.
func compactionDrift(configs []kadm.Config) []kadm.AlterConfig {
	got := make(map[string]string, len(configs))
	for _, cfg := range configs {
		got[cfg.Key] = cfg.MaybeValue()
	}
	var drift []kadm.AlterConfig
	for _, k := range compactionKeys() {
		want := CompactedConfigs[k]
		if !sameValue(got[k], want) {
			drift = append(drift, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(want)})
		}
	}
	return drift
}

// compactionKeys are the keys of CompactedConfigs but cleanup.policy, sorted.
func compactionKeys() []string {
	keys := make([]string, 0, len(CompactedConfigs))
	for k := range CompactedConfigs {
		if k != "cleanup.policy" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// sameValue compares numbers as numbers ("0.010" is "0.01").
func sameValue(got, want string) bool {
	g, errG := strconv.ParseFloat(got, 64)
	w, errW := strconv.ParseFloat(want, 64)
	if errG == nil && errW == nil {
		return g == w
	}
	return got == want
}

// AlignCommand is the kafka-configs.sh command that does by hand what
// AlignConfigTopics does, for a principal without AlterConfigs.
func AlignCommand(topic string) string {
	sets := make([]string, 0, len(CompactedConfigs))
	for _, k := range compactionKeys() {
		sets = append(sets, k+"="+CompactedConfigs[k])
	}
	return "kafka-configs.sh --bootstrap-server $BROKERS --alter --entity-type topics --entity-name " + topic +
		" --add-config " + strings.Join(sets, ",")
}
