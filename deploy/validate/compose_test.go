package validate

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"
)

// loadCompose loads docker-compose.yml the way `docker compose` does
// (compose-go, the library behind it: schema validation, interpolation,
// extension fields and merges), with the variables of .env.example only,
// so the test does not depend on a developer's .env.
func loadCompose(t *testing.T, envFiles ...string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{repoPath("docker-compose.yml")},
		cli.WithWorkingDirectory(root),
		cli.WithEnvFiles(envFiles...),
		cli.WithDotEnv,
		cli.WithName("laneway"),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(envFiles) == 0 {
		opts.EnvFiles = nil
		opts.Environment = types.Mapping{}
	}
	return opts.LoadProject(context.Background())
}

// TestCompose checks docker-compose.yml: it loads, every file and directory
// it mounts or builds from exists, dependencies exist and wait for health
// where a healthcheck is defined, images are pinned, and the Laneway
// services run with real flags, distinct instance ids and a token.
func TestCompose(t *testing.T) {
	if _, err := loadCompose(t); err == nil || !strings.Contains(err.Error(), "LANEWAY_ADMIN_TOKEN") {
		t.Errorf("compose loads without LANEWAY_ADMIN_TOKEN (err %v): it must require one", err)
	}
	p, err := loadCompose(t, repoPath(".env.example"))
	if err != nil {
		t.Fatalf("docker-compose.yml with .env.example: %v", err)
	}
	want := []string{"kafka", "redis", "laneway-1", "laneway-2", "demo-fleet", "prometheus", "grafana"}
	for _, name := range want {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("no service %s", name)
		}
	}
	flags := map[string]bool{}
	if !testing.Short() {
		flags = serveFlagNames(t)
	}
	pinned := regexp.MustCompile(`^[a-z0-9./-]+:[A-Za-z0-9._-]+$`)
	instanceIDs := map[string]string{}
	for name, s := range p.Services {
		if s.Build != nil {
			ctx := s.Build.Context
			if fi, err := os.Stat(ctx); err != nil || !fi.IsDir() {
				t.Errorf("%s: build context %s is not a directory", name, ctx)
			}
			df := s.Build.Dockerfile
			if !filepath.IsAbs(df) {
				df = filepath.Join(ctx, df)
			}
			if _, err := os.Stat(df); err != nil {
				t.Errorf("%s: Dockerfile %s: %v", name, df, err)
			}
		}
		if s.Image == "" || !pinned.MatchString(s.Image) || strings.HasSuffix(s.Image, ":latest") {
			t.Errorf("%s: image %q is not pinned to a tag", name, s.Image)
		}
		for _, v := range s.Volumes {
			switch v.Type {
			case types.VolumeTypeBind:
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("%s: bind mount source %s: %v", name, v.Source, err)
				}
				if !strings.HasPrefix(v.Source, root) {
					t.Errorf("%s: bind mount %s is outside the repository", name, v.Source)
				}
			case types.VolumeTypeVolume:
				if _, ok := p.Volumes[v.Source]; !ok {
					t.Errorf("%s: named volume %s is not declared", name, v.Source)
				}
			}
		}
		for _, ef := range s.EnvFiles {
			if _, err := os.Stat(ef.Path); err != nil && ef.Required {
				t.Errorf("%s: env_file %s: %v", name, ef.Path, err)
			}
		}
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			if !ok {
				t.Errorf("%s depends on unknown service %s", name, dep)
				continue
			}
			if d.Condition == types.ServiceConditionHealthy && (target.HealthCheck == nil || target.HealthCheck.Disable) {
				t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
		if (s.HealthCheck == nil || len(s.HealthCheck.Test) == 0) && name != "demo-fleet" {
			t.Errorf("%s has no healthcheck", name)
		}

		if !strings.HasPrefix(name, "laneway-") {
			continue
		}
		if s.Image != p.Services["demo-fleet"].Image {
			t.Errorf("%s runs %s, the demo fleet %s: both are the laneway image", name, s.Image, p.Services["demo-fleet"].Image)
		}
		if len(s.Command) == 0 || s.Command[0] != "serve" {
			t.Fatalf("%s: command %v, want serve ...", name, s.Command)
		}
		args := map[string]string{}
		for _, a := range s.Command[1:] {
			k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !strings.HasPrefix(a, "--") || !ok {
				t.Errorf("%s: argument %q: write flags as --name=value", name, a)
				continue
			}
			if len(flags) > 0 && !flags[k] {
				t.Errorf("%s: --%s is not a flag of laneway serve", name, k)
			}
			args[k] = v
		}
		for env := range s.Environment {
			if strings.HasPrefix(env, "LANEWAY_") && len(flags) > 0 &&
				!flags[strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, "LANEWAY_")), "_", "-")] {
				t.Errorf("%s: %s is not a variable laneway serve reads", name, env)
			}
		}
		if prev, dup := instanceIDs[args["instance-id"]]; dup || args["instance-id"] == "" {
			t.Errorf("%s: --instance-id %q is empty or also used by %s", name, args["instance-id"], prev)
		}
		instanceIDs[args["instance-id"]] = name
		if args["kafka-brokers"] != "kafka:9092" || !strings.HasPrefix(args["redis-url"], "redis://redis:6379") {
			t.Errorf("%s: brokers %q, redis %q: want the compose kafka and redis", name, args["kafka-brokers"], args["redis-url"])
		}
		if tok := s.Environment["LANEWAY_ADMIN_TOKEN"]; strings.HasPrefix(args["http-addr"], "0.0.0.0:") && (tok == nil || *tok == "") {
			t.Errorf("%s listens on %s without LANEWAY_ADMIN_TOKEN: Laneway refuses to start", name, args["http-addr"])
		}
		if !publishes(s, args["public-addr"]) {
			t.Errorf("%s: --public-addr %q is not set or not published to the host: the front door must have a listener of its own", name, args["public-addr"])
		}
		if args["allow-targets"] == "" || p.Networks["laneway"].Ipam.Config == nil ||
			args["allow-targets"] != p.Networks["laneway"].Ipam.Config[0].Subnet {
			t.Errorf("%s: --allow-targets %q must be the compose network's subnet, so the demo receivers are reachable", name, args["allow-targets"])
		}
	}

	demo := p.Services["demo-fleet"]
	if wantCmd := []string{"demo", "--api", "http://laneway-1:8080", "--fleet-listen", "0.0.0.0:9100", "--fleet-host", "demo-fleet", "--public-url", "http://localhost:8080"}; !slices.Equal(demo.Command, wantCmd) {
		t.Errorf("demo-fleet command %v, want %v", demo.Command, wantCmd)
	}

	// Prometheus scrapes both instances; Grafana's provisioning points at
	// the compose Prometheus and at the mounted dashboard.
	var prom struct {
		RuleFiles     []string `json:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(readFile(t, "deploy", "prometheus", "prometheus.yml"), &prom); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.JobName == "laneway" {
			for _, st := range sc.StaticConfigs {
				targets = append(targets, st.Targets...)
			}
		}
	}
	slices.Sort(targets)
	if !slices.Equal(targets, []string{"laneway-1:8080", "laneway-2:8080"}) {
		t.Errorf("job laneway scrapes %v, want both Laneway services on 8080", targets)
	}
	mounted := map[string]string{} // target in a container -> source in the repo
	for _, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				mounted[v.Target] = v.Source
			}
		}
	}
	for _, rf := range prom.RuleFiles {
		if mounted[rf] != repoPath("deploy", "prometheus", "alerts.yml") {
			t.Errorf("prometheus rule file %s is not alerts.yml mounted", rf)
		}
	}

	var ds struct {
		Datasources []struct {
			UID, Type, URL string
		} `json:"datasources"`
	}
	if err := yaml.Unmarshal(readFile(t, "deploy", "grafana", "provisioning", "datasources", "prometheus.yml"), &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("grafana datasources %+v, want the compose prometheus", ds.Datasources)
	}
	var dp struct {
		Providers []struct {
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	if err := yaml.Unmarshal(readFile(t, "deploy", "grafana", "provisioning", "dashboards", "laneway.yml"), &dp); err != nil {
		t.Fatal(err)
	}
	if len(dp.Providers) != 1 || mounted[dp.Providers[0].Options.Path+"/laneway-dashboard.json"] != repoPath("deploy", "grafana", "laneway-dashboard.json") {
		t.Errorf("grafana dashboard provider path %+v does not hold the mounted laneway-dashboard.json", dp.Providers)
	}
	if mounted["/etc/grafana/provisioning"] != repoPath("deploy", "grafana", "provisioning") {
		t.Error("grafana does not mount deploy/grafana/provisioning at /etc/grafana/provisioning")
	}
}

// publishes says whether addr (host:port) is set and its port is published
// by the service.
func publishes(s types.ServiceConfig, addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	for _, p := range s.Ports {
		if strconv.FormatUint(uint64(p.Target), 10) == port && p.Published != "" {
			return true
		}
	}
	return false
}
