package validate

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// synthetic are series Prometheus makes itself rather than scraping.
var synthetic = map[string]bool{"up": true, "scrape_duration_seconds": true, "ALERTS": true}

var promqlParser = parser.NewParser(parser.Options{})

// metricNames parses expr and returns every metric name it selects. A
// selector without a name (only label matchers) is an error: every query
// must say which metric it reads.
func metricNames(expr string) ([]string, error) {
	e, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			if name == "" {
				bad = &nameless{vs.String()}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, bad
}

type nameless struct{ sel string }

func (n *nameless) Error() string { return "selector " + n.sel + " names no metric" }

// grafanaVars replaces Grafana's template variables with values PromQL parses.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m", "${__rate_interval}", "5m", "$__interval", "1m", "${__interval}", "1m",
	"$__range", "1h", "${__range}", "1h", "$instance", ".*", "${instance}", ".*",
)

// ---- alert rules ----

func loadAlerts(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.Parse(readFile(t, "deploy", "prometheus", "alerts.yml"), false, model.UTF8Validation,
		promqlParser, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Errorf("alerts.yml: %v", err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatal("alerts.yml has no rule groups")
	}
	return groups
}

// wantedAlerts are the alerts the operator guide documents; each must exist.
var wantedAlerts = []string{
	"LanewayEndpointOldestPendingHigh", "LanewayHealthyEndpointsDelayed", "LanewayBreakerOpenLong",
	"LanewayDeadLetters", "LanewayWatermarkLagGrowing", "LanewayInstanceDown",
	"LanewayParkedBacklogAging", "LanewayParkedExpired", "LanewayTimestampRefused",
}

// TestAlertRules parses alerts.yml strictly (unknown fields rejected, every
// expression and template checked, as Prometheus loads it) and checks each
// alert's labels, annotations and runbook link.
func TestAlertRules(t *testing.T) {
	groups := loadAlerts(t)
	anchors := markdownAnchors(readFile(t, "docs", "operator-guide.md"))
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			seen[r.Alert] = true
			if sev := r.Labels["severity"]; sev != "warning" && sev != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, sev)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			want := "docs/operator-guide.md#" + strings.ToLower(r.Alert)
			if !strings.HasSuffix(r.Annotations["runbook_url"], want) {
				t.Errorf("%s: runbook_url %q, want it to end in %s", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("%s: docs/operator-guide.md has no heading %q for its runbook link", r.Alert, r.Alert)
			}
			if !strings.Contains(r.Expr, `job="laneway"`) {
				t.Errorf("%s: expression does not select job=\"laneway\": %s", r.Alert, r.Expr)
			}
			if r.For == 0 {
				t.Errorf("%s: no 'for': one bad scrape would page", r.Alert)
			}
		}
	}
	for _, a := range wantedAlerts {
		if !seen[a] {
			t.Errorf("alerts.yml has no alert %s", a)
		}
	}
}

// TestPromtoolCheckRules runs `promtool check rules` on alerts.yml, as the
// Prometheus that loads it would.
func TestPromtoolCheckRules(t *testing.T) {
	promtool := requirePromtool(t)
	out, err := exec.Command(promtool, "check", "rules", repoPath("deploy", "prometheus", "alerts.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// TestPromtoolCheckConfig runs `promtool check config` on the compose
// Prometheus config, with its rule file pointed at the repository's copy.
func TestPromtoolCheckConfig(t *testing.T) {
	promtool := requirePromtool(t)
	cfg := string(readFile(t, "deploy", "prometheus", "prometheus.yml"))
	if !strings.Contains(cfg, "/etc/prometheus/alerts.yml") {
		t.Fatal("prometheus.yml does not load /etc/prometheus/alerts.yml (where compose mounts alerts.yml)")
	}
	cfg = strings.ReplaceAll(cfg, "/etc/prometheus/alerts.yml", repoPath("deploy", "prometheus", "alerts.yml"))
	path := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "config", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

// kpromLint are the findings of `promtool check metrics` on franz-go's kprom
// metrics: gauges that kprom names with a _total suffix. They are kprom's
// names (github.com/twmb/franz-go/plugin/kprom), kept as they are so that
// kprom dashboards work; anything else promtool finds fails the test.
var kpromLint = regexp.MustCompile(`^laneway_kafka_buffered_(fetch|produce)_records_total non-counter metrics should not have "_total" suffix$`)

// TestPromtoolCheckMetrics lints a real /metrics scrape with promtool.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := requirePromtool(t)
	if testing.Short() {
		t.Skip("starts Laneway")
	}
	s := lanewayScrape(t, usedMetricNames(t))
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(s.body))
	out, err := cmd.CombinedOutput()
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line = strings.TrimSpace(line); line != "" && !kpromLint.MatchString(line) {
			problems = append(problems, line)
		}
	}
	if len(problems) > 0 {
		t.Fatalf("promtool check metrics (%v):\n%s", err, strings.Join(problems, "\n"))
	}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 { // 3: lint findings only
			t.Fatalf("promtool check metrics: %v\n%s", err, out)
		}
	}
}

func requirePromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH (the Debian package prometheus has it; `make test` installs it)")
	}
	return p
}

// ---- dashboard ----

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	Targets    []struct {
		Expr       string         `json:"expr"`
		RefID      string         `json:"refId"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(readFile(t, "deploy", "grafana", "laneway-dashboard.json"), &d); err != nil {
		t.Fatalf("laneway-dashboard.json: %v", err)
	}
	return d
}

// dashboardExprs returns every PromQL expression of the dashboard, by the
// title of the panel (or variable) that holds it.
func dashboardExprs(t *testing.T, d dashboard) map[string][]string {
	t.Helper()
	exprs := map[string][]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs[p.Title] = append(exprs[p.Title], tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_]+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, v.Definition)
			continue
		}
		exprs["variable "+v.Name] = append(exprs["variable "+v.Name], m[1])
	}
	return exprs
}

// TestDashboard checks the dashboard's structure and that every query parses.
func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("dashboard needs a uid and a title")
	}
	ids := map[int]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type != "row" {
				if p.Datasource["uid"] != "${datasource}" {
					t.Errorf("panel %q: datasource %v, want the ${datasource} variable", p.Title, p.Datasource)
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", p.Title)
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	exprs := dashboardExprs(t, d)
	for title, list := range exprs {
		for _, e := range list {
			if _, err := metricNames(grafanaVars.Replace(e)); err != nil {
				t.Errorf("%s: %q: %v", title, e, err)
			}
			if !strings.HasPrefix(title, "variable") && !strings.Contains(e, `job="laneway"`) {
				t.Errorf("%s: %q does not select job=\"laneway\"", title, e)
			}
		}
	}
	// The dashboard shows what the issue asks for.
	all := ""
	for _, list := range exprs {
		all += strings.Join(list, "\n") + "\n"
	}
	for _, want := range []string{
		"topk(10, max by (endpoint) (laneway_endpoint_oldest_pending_age_seconds",
		"laneway_healthy_oldest_pending_age_seconds", "laneway_endpoint_pending", "laneway_endpoint_in_flight",
		"laneway_deliveries_total", "histogram_quantile(0.5,", "histogram_quantile(0.99,",
		"laneway_delivery_attempt_duration_seconds_bucket", "laneway_endpoint_breaker_open",
		"sum by (reason) (rate(laneway_dead_letters_total", "laneway_endpoint_parked",
		"laneway_partition_watermark_lag_offsets", "laneway_partition_watermark_lag_seconds",
		"laneway_kafka_produce_bytes_total", "laneway_kafka_fetch_bytes_total",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no dashboard query contains %q", want)
		}
	}
}

// usedMetricNames are the metric names the dashboard and the alert rules
// read, less the ones Prometheus makes itself.
func usedMetricNames(t *testing.T) []string {
	t.Helper()
	used := map[string]bool{}
	add := func(where, expr string) {
		names, err := metricNames(grafanaVars.Replace(expr))
		if err != nil {
			t.Fatalf("%s: %q: %v", where, expr, err)
		}
		for _, n := range names {
			if !synthetic[n] {
				used[n] = true
			}
		}
	}
	for title, list := range dashboardExprs(t, loadDashboard(t)) {
		for _, e := range list {
			add("dashboard panel "+title, e)
		}
	}
	for _, g := range loadAlerts(t).Groups {
		for _, r := range g.Rules {
			add("alert "+r.Alert, r.Expr)
		}
	}
	out := sortedKeys(used)
	sort.Strings(out)
	return out
}

// TestMetricNamesExist starts a real Laneway (embedded Kafka and Redis),
// drives deliveries of every outcome through it and checks that its
// /metrics exposes every metric the dashboard and the alerts use.
func TestMetricNamesExist(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Laneway")
	}
	used := usedMetricNames(t)
	s := lanewayScrape(t, used)
	for _, n := range used {
		if !s.series[n] {
			t.Errorf("%s is used by the deploy artifacts but Laneway does not expose it", n)
		}
	}
	t.Logf("checked %d metric names against a real scrape: %s", len(used), strings.Join(used, ", "))
}
