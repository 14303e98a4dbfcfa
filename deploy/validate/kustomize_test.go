package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/yannh/kubeconform/pkg/resource"
	"github.com/yannh/kubeconform/pkg/validator"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kustomizations are built and validated; the overlay proves the base
// composes (namespace, image, replicas, patches).
var kustomizations = []string{"deploy/kubernetes/base", "deploy/kubernetes/overlays/example"}

// k8sVersions are the Kubernetes releases whose schemas are vendored in
// testdata/kubernetes-schemas (see its README).
var k8sVersions = []string{"1.30.0", "1.37.0"}

// object is one built resource: its YAML and what it decoded into.
type object struct {
	kind, name string
	yaml       []byte
	typed      any
}

// build runs kustomize (the krusty API, as `kubectl kustomize` does) on an
// on-disk directory and decodes every resource strictly into its Go type:
// a field the type does not have is an error.
func build(t *testing.T, dir string) []object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), repoPath(dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []object
	for _, r := range resMap.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		o := object{kind: r.GetKind(), name: r.GetName(), yaml: y}
		switch o.kind {
		case "ConfigMap":
			o.typed = &corev1.ConfigMap{}
		case "Secret":
			o.typed = &corev1.Secret{}
		case "Service":
			o.typed = &corev1.Service{}
		case "Namespace":
			o.typed = &corev1.Namespace{}
		case "Deployment":
			o.typed = &appsv1.Deployment{}
		case "PodDisruptionBudget":
			o.typed = &policyv1.PodDisruptionBudget{}
		case "Ingress":
			o.typed = &networkingv1.Ingress{}
		case "NetworkPolicy":
			o.typed = &networkingv1.NetworkPolicy{}
		case "ServiceMonitor":
			o.typed = &monitoringv1.ServiceMonitor{}
		case "PrometheusRule":
			o.typed = &monitoringv1.PrometheusRule{}
		default:
			t.Errorf("%s: %s/%s has no Go type to check it against; add it here", dir, o.kind, o.name)
			continue
		}
		if err := yaml.UnmarshalStrict(y, o.typed); err != nil {
			t.Errorf("%s: %s/%s does not decode strictly: %v", dir, o.kind, o.name, err)
		}
		out = append(out, o)
	}
	return out
}

func find[T any](t *testing.T, objs []object) *T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.typed.(*T); ok {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T in the build", zero)
	return nil
}

// TestKubeconform validates every built object against the Kubernetes JSON
// schemas (strict: unknown fields are errors) of the oldest and newest
// release vendored. The Prometheus Operator CRs have no schema there; they
// are decoded strictly into the operator's Go types in build.
func TestKubeconform(t *testing.T) {
	schemas, _ := filepath.Abs(filepath.Join("testdata", "kubernetes-schemas"))
	location := schemas + "/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json"
	for _, version := range k8sVersions {
		v, err := validator.New([]string{location}, validator.Opts{
			Strict:            true,
			KubernetesVersion: version,
			SkipKinds:         map[string]struct{}{"ServiceMonitor": {}, "PrometheusRule": {}},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range kustomizations {
			for _, o := range build(t, dir) {
				res := v.ValidateResource(resource.Resource{Path: dir, Bytes: o.yaml})
				switch {
				case res.Status == validator.Skipped && (o.kind == "ServiceMonitor" || o.kind == "PrometheusRule"):
				case res.Status != validator.Valid:
					t.Errorf("k8s %s, %s: %s/%s: status %d: %v %v", version, dir, o.kind, o.name, res.Status, res.Err, res.ValidationErrors)
				}
			}
		}
	}
	// The validator must reject what is wrong, not pass everything.
	v, _ := validator.New([]string{location}, validator.Opts{Strict: true, KubernetesVersion: k8sVersions[0]})
	bad := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replicas: two\n  selectorr: {}\n")
	if res := v.ValidateResource(resource.Resource{Bytes: bad}); res.Status != validator.Invalid {
		t.Errorf("a broken Deployment validated with status %d (%v)", res.Status, res.Err)
	}
}

// TestManifests checks what the schemas cannot: probes, security context,
// selectors that select, config keys that Laneway reads, placeholder secrets.
func TestManifests(t *testing.T) {
	env := map[string]bool{}
	if !testing.Short() {
		env = serveEnv(t)
	}
	for _, dir := range kustomizations {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			objs := build(t, dir)
			dep := find[appsv1.Deployment](t, objs)
			svc := find[corev1.Service](t, objs)
			pdb := find[policyv1.PodDisruptionBudget](t, objs)
			cm := find[corev1.ConfigMap](t, objs)
			secret := find[corev1.Secret](t, objs)
			sm := find[monitoringv1.ServiceMonitor](t, objs)
			rule := find[monitoringv1.PrometheusRule](t, objs)

			podLabels := labels.Set(dep.Spec.Template.Labels)
			sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
			if err != nil || !sel.Matches(podLabels) {
				t.Errorf("Deployment selector %v does not match its pod labels %v", dep.Spec.Selector, podLabels)
			}
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
				t.Errorf("Service selector %v does not match the pods %v", svc.Spec.Selector, podLabels)
			}
			if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !s.Matches(podLabels) {
				t.Errorf("PodDisruptionBudget selector %v does not match the pods", pdb.Spec.Selector)
			}
			if s, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector); err != nil || !s.Matches(labels.Set(svc.Labels)) {
				t.Errorf("ServiceMonitor selector %v does not match the Service's labels %v", sm.Spec.Selector, svc.Labels)
			}
			if sm.Spec.JobLabel == "" || svc.Labels[sm.Spec.JobLabel] != "laneway" {
				t.Errorf("ServiceMonitor jobLabel %q: the Service's value must be laneway (the rules select job=\"laneway\")", sm.Spec.JobLabel)
			}
			if dep.Namespace != svc.Namespace || dep.Namespace != sm.Namespace || dep.Namespace != rule.Namespace {
				t.Errorf("objects in different namespaces: %q %q %q %q", dep.Namespace, svc.Namespace, sm.Namespace, rule.Namespace)
			}

			pod := dep.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("want one container, have %d", len(pod.Containers))
			}
			c := pod.Containers[0]
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			if ports["http"] != 8080 {
				t.Errorf("container port http = %d, want 8080 (LANEWAY_HTTP_ADDR)", ports["http"])
			}
			if got := cm.Data["LANEWAY_HTTP_ADDR"]; got != "0.0.0.0:8080" {
				t.Errorf("LANEWAY_HTTP_ADDR = %q, want 0.0.0.0:8080", got)
			}
			if ports["public"] != 8081 || cm.Data["LANEWAY_PUBLIC_ADDR"] != "0.0.0.0:8081" {
				t.Errorf("container port public = %d, LANEWAY_PUBLIC_ADDR = %q: want the front door alone on 8081", ports["public"], cm.Data["LANEWAY_PUBLIC_ADDR"])
			}
			checkExposure(t, find[networkingv1.Ingress](t, objs), find[networkingv1.NetworkPolicy](t, objs), podLabels)
			probe := func(name string, p *corev1.Probe, path string) {
				if p == nil || p.HTTPGet == nil {
					t.Errorf("no %s httpGet probe", name)
					return
				}
				if p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromString("http") {
					t.Errorf("%s probe GET %s on %v, want %s on http", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
				}
			}
			probe("readiness", c.ReadinessProbe, "/readyz")
			probe("liveness", c.LivenessProbe, "/healthz")
			probe("startup", c.StartupProbe, "/healthz")
			for _, sp := range svc.Spec.Ports {
				if _, ok := ports[sp.TargetPort.String()]; !ok || sp.TargetPort.String() != sp.Name {
					t.Errorf("Service port %s targets %s, want the container's port of that name", sp.Name, sp.TargetPort.String())
				}
			}
			if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
				t.Errorf("ServiceMonitor endpoints %+v, want /metrics on the Service's port %s", sm.Spec.Endpoints, svc.Spec.Ports[0].Name)
			}

			psc, sc := pod.SecurityContext, c.SecurityContext
			switch {
			case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0:
				t.Error("pod securityContext must set runAsNonRoot and a non-zero runAsUser")
			case sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Error("container must have a read-only root filesystem")
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Error("container must set allowPrivilegeEscalation: false")
			case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
				t.Error("container must drop ALL capabilities")
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
			}

			// Every LANEWAY_* setting is one `laneway serve` reads, and every
			// secret reference resolves.
			secretKeys := map[string]bool{}
			for k := range secret.StringData {
				secretKeys[k] = true
			}
			for k := range secret.Data {
				secretKeys[k] = true
			}
			var names []string
			for k := range cm.Data {
				names = append(names, k)
			}
			for _, e := range c.Env {
				names = append(names, e.Name)
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					ref := e.ValueFrom.SecretKeyRef
					if ref.Name != secret.Name || !secretKeys[ref.Key] {
						t.Errorf("env %s references secret %s key %s, which the build does not have", e.Name, ref.Name, ref.Key)
					}
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef == nil || ef.ConfigMapRef.Name != cm.Name {
					t.Errorf("envFrom %+v does not reference the ConfigMap %s", ef, cm.Name)
				}
			}
			for _, n := range names {
				if strings.HasPrefix(n, "LANEWAY_") && len(env) > 0 && !env[n] {
					t.Errorf("%s is not a variable `laneway serve` reads", n)
				}
			}
			for k, v := range secret.StringData {
				if !strings.Contains(v, "REPLACE-ME") {
					t.Errorf("Secret key %s holds %q: the repository ships placeholders only (REPLACE-ME)", k, v)
				}
			}
			if len(secret.Data) > 0 {
				t.Error("Secret has data: the repository ships placeholders only, in stringData")
			}

			groups := loadAlerts(t)
			if len(rule.Spec.Groups) != len(groups.Groups) {
				t.Fatalf("PrometheusRule has %d groups, alerts.yml %d", len(rule.Spec.Groups), len(groups.Groups))
			}
			for i, g := range groups.Groups {
				rg := rule.Spec.Groups[i]
				if rg.Name != g.Name || len(rg.Rules) != len(g.Rules) {
					t.Fatalf("PrometheusRule group %d (%s, %d rules) differs from alerts.yml (%s, %d rules)", i, rg.Name, len(rg.Rules), g.Name, len(g.Rules))
				}
				for j, r := range g.Rules {
					pr := rg.Rules[j]
					var prFor model.Duration
					if pr.For != nil {
						prFor, _ = model.ParseDuration(string(*pr.For))
					}
					if pr.Alert != r.Alert || pr.Expr.String() != r.Expr || prFor != r.For ||
						!reflect.DeepEqual(pr.Labels, r.Labels) || !reflect.DeepEqual(pr.Annotations, r.Annotations) {
						t.Errorf("PrometheusRule rule %s differs from alerts.yml", r.Alert)
					}
				}
			}
		})
	}
}

// prometheusRuleYAML is deploy/kubernetes/base/prometheusrule.yaml: the
// groups of deploy/prometheus/alerts.yml, verbatim, under a PrometheusRule.
func prometheusRuleYAML(t *testing.T) []byte {
	t.Helper()
	alerts := readFile(t, "deploy", "prometheus", "alerts.yml")
	i := bytes.Index(alerts, []byte("\ngroups:\n"))
	if i < 0 {
		t.Fatal("alerts.yml has no top-level groups: line")
	}
	var b bytes.Buffer
	b.WriteString(`# GENERATED from deploy/prometheus/alerts.yml: do not edit. To change the
# alerts, edit alerts.yml and run
#   cd deploy/validate && go test -run TestPrometheusRuleMatchesAlerts -update
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: laneway
spec:
`)
	for _, line := range strings.SplitAfter(string(alerts[i+1:]), "\n") {
		if strings.TrimSpace(line) == "" {
			b.WriteString(line)
			continue
		}
		b.WriteString("  " + line)
	}
	return b.Bytes()
}

// TestPrometheusRuleMatchesAlerts keeps the Kubernetes PrometheusRule equal
// to alerts.yml (with -update it rewrites the PrometheusRule).
func TestPrometheusRuleMatchesAlerts(t *testing.T) {
	want := prometheusRuleYAML(t)
	path := repoPath("deploy", "kubernetes", "base", "prometheusrule.yaml")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not alerts.yml's rules: run `go test -run TestPrometheusRuleMatchesAlerts -update` here", path)
	}
}

// checkExposure: the Ingress routes /in/ alone, to the public port (the
// front door without the API, console or /metrics), and the NetworkPolicy
// covers the pods and lets the public port and the API port be reached.
func checkExposure(t *testing.T, ing *networkingv1.Ingress, np *networkingv1.NetworkPolicy, pods labels.Set) {
	t.Helper()
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for _, p := range rule.HTTP.Paths {
			if p.Path != "/in/" || p.PathType == nil || *p.PathType != networkingv1.PathTypePrefix || p.Backend.Service == nil || p.Backend.Service.Port.Name != "public" {
				t.Errorf("Ingress path %q (%v) to %+v: want only Prefix /in/ to the Service's public port", p.Path, p.PathType, p.Backend.Service)
			}
		}
	}
	if ing.Spec.DefaultBackend != nil {
		t.Errorf("Ingress has a default backend %+v: it would expose more than /in/", ing.Spec.DefaultBackend)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || !sel.Matches(pods) {
		t.Errorf("NetworkPolicy selects %v, not the pods %v", np.Spec.PodSelector, pods)
	}
	opened := map[string]bool{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port != nil {
				opened[p.Port.String()] = true
			}
		}
	}
	if !opened["public"] || !opened["http"] || len(opened) != 2 {
		t.Errorf("NetworkPolicy opens ports %v, want public and http", opened)
	}
}
