package validate

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
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
		case "StatefulSet":
			o.typed = &appsv1.StatefulSet{}
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

// services are the build's Services by name.
func services(objs []object) map[string]*corev1.Service {
	out := map[string]*corev1.Service{}
	for _, o := range objs {
		if v, ok := o.typed.(*corev1.Service); ok {
			out[v.Name] = v
		}
	}
	return out
}

// apiService is the Service clients, the Ingress and the ServiceMonitor use.
func apiService(t *testing.T, objs []object) *corev1.Service {
	t.Helper()
	svc := services(objs)["laneway"]
	if svc == nil {
		t.Fatal("no Service laneway in the build")
	}
	return svc
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
	bad := []byte("apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: x\nspec:\n  replicas: two\n  selectorr: {}\n")
	if res := v.ValidateResource(resource.Resource{Bytes: bad}); res.Status != validator.Invalid {
		t.Errorf("a broken StatefulSet validated with status %d (%v)", res.Status, res.Err)
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
			sts := find[appsv1.StatefulSet](t, objs)
			svc := apiService(t, objs)
			pdb := find[policyv1.PodDisruptionBudget](t, objs)
			cm := find[corev1.ConfigMap](t, objs)
			secret := find[corev1.Secret](t, objs)
			sm := find[monitoringv1.ServiceMonitor](t, objs)
			rule := find[monitoringv1.PrometheusRule](t, objs)

			podLabels := labels.Set(sts.Spec.Template.Labels)
			sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
			if err != nil || !sel.Matches(podLabels) {
				t.Errorf("StatefulSet selector %v does not match its pod labels %v", sts.Spec.Selector, podLabels)
			}
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
				t.Errorf("Service selector %v does not match the pods %v", svc.Spec.Selector, podLabels)
			}
			if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !s.Matches(podLabels) {
				t.Errorf("PodDisruptionBudget selector %v does not match the pods", pdb.Spec.Selector)
			}
			smSel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
			if err != nil || !smSel.Matches(labels.Set(svc.Labels)) {
				t.Errorf("ServiceMonitor selector %v does not match the Service's labels %v", sm.Spec.Selector, svc.Labels)
			}
			for name, other := range services(objs) {
				if err == nil && name != svc.Name && smSel.Matches(labels.Set(other.Labels)) {
					t.Errorf("ServiceMonitor selector %v also matches Service %s: every pod would be scraped twice", sm.Spec.Selector, name)
				}
			}
			if sm.Spec.JobLabel == "" || svc.Labels[sm.Spec.JobLabel] != "laneway" {
				t.Errorf("ServiceMonitor jobLabel %q: the Service's value must be laneway (the rules select job=\"laneway\")", sm.Spec.JobLabel)
			}
			if sts.Namespace != svc.Namespace || sts.Namespace != sm.Namespace || sts.Namespace != rule.Namespace {
				t.Errorf("objects in different namespaces: %q %q %q %q", sts.Namespace, svc.Namespace, sm.Namespace, rule.Namespace)
			}

			pod := sts.Spec.Template.Spec
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
			// The shipped admin token must not work: `laneway serve` (the
			// image's binary) given it as the Pod is, in the file of
			// --admin-token-file, refuses to start.
			checkTokenRefused(t, filepath.Join(dockerBuild(t), "laneway"), secret.StringData["admin-token"])
			checkSecretFiles(t, pod, c, secret, secretKeys)

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

// checkSecretFiles: secrets reach the container as files, never as
// variables. No env entry reads a Secret key into the environment, and
// every *_FILE variable names a file that a mount of the Secret provides
// from a key the Secret has.
func checkSecretFiles(t *testing.T, pod corev1.PodSpec, c corev1.Container, secret *corev1.Secret, secretKeys map[string]bool) {
	t.Helper()
	files := map[string]string{} // path in the container -> Secret key
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.Secret == nil || v.Secret.SecretName != secret.Name {
				continue
			}
			if !m.ReadOnly {
				t.Errorf("volume %s (Secret %s) is mounted writable", v.Name, secret.Name)
			}
			for _, it := range v.Secret.Items {
				files[path.Join(m.MountPath, it.Path)] = it.Key
			}
		}
	}
	var fileVars []string
	for _, e := range c.Env {
		if e.Name == "LANEWAY_ADMIN_TOKEN" || (e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key == "admin-token") {
			t.Errorf("env %s carries the admin token in the environment: mount it and set LANEWAY_ADMIN_TOKEN_FILE", e.Name)
		}
		if !strings.HasSuffix(e.Name, "_FILE") {
			continue
		}
		fileVars = append(fileVars, e.Name)
		key, ok := files[e.Value]
		switch {
		case !ok:
			t.Errorf("%s=%s: no mount of Secret %s provides that file (mounted: %v)", e.Name, e.Value, secret.Name, files)
		case !secretKeys[key]:
			t.Errorf("%s=%s is Secret key %s, which the Secret does not have", e.Name, e.Value, key)
		}
	}
	for _, want := range []string{"LANEWAY_ADMIN_TOKEN_FILE", "LANEWAY_SECRETS_KEY_FILE"} {
		if !slices.Contains(fileVars, want) {
			t.Errorf("no %s in the container's env (have %v)", want, fileVars)
		}
	}
	if files["/etc/laneway/admin/admin-token"] != "admin-token" {
		t.Errorf("the admin token file is not mounted from Secret key admin-token: %v", files)
	}
}

// TestInstanceIDSurvivesPodReplacement checks the property the StatefulSet
// is there for (docs/deploy.md, "Why a StatefulSet"): the instance id, which
// names the static group membership and suffixes the transactional ids, is
// the pod name of a StatefulSet's pod (laneway-0, laneway-1, ...), so a pod
// that is replaced comes back under the same id, and two pods never share
// one. A Deployment's pod name (random per pod), the pod's uid, its node, a
// fixed value in the ConfigMap or a flag would each break it.
func TestInstanceIDSurvivesPodReplacement(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			objs := build(t, dir)
			var workloads []string
			for _, o := range objs {
				switch o.kind {
				case "Deployment", "ReplicaSet", "DaemonSet", "Pod", "Job", "CronJob", "StatefulSet":
					workloads = append(workloads, o.kind+"/"+o.name)
				}
			}
			if len(workloads) != 1 || !strings.HasPrefix(workloads[0], "StatefulSet/") {
				t.Fatalf("workloads %v: want exactly one StatefulSet (stable pod names)", workloads)
			}
			sts := find[appsv1.StatefulSet](t, objs)
			pod := sts.Spec.Template
			if pod.Name != "" || pod.GenerateName != "" {
				t.Errorf("the pod template sets a name (%q/%q): StatefulSet pods are named <set>-<ordinal>", pod.Name, pod.GenerateName)
			}
			c := pod.Spec.Containers[0]
			var ids []corev1.EnvVar
			for _, e := range c.Env {
				if e.Name == "LANEWAY_INSTANCE_ID" {
					ids = append(ids, e)
				}
			}
			if len(ids) != 1 || ids[0].ValueFrom == nil || ids[0].ValueFrom.FieldRef == nil || ids[0].ValueFrom.FieldRef.FieldPath != "metadata.name" {
				t.Errorf("LANEWAY_INSTANCE_ID is %+v: want exactly one, from the pod's metadata.name", ids)
			}
			if _, ok := find[corev1.ConfigMap](t, objs).Data["LANEWAY_INSTANCE_ID"]; ok {
				t.Error("the ConfigMap sets LANEWAY_INSTANCE_ID: every pod would share one id")
			}
			for _, a := range append(append([]string{}, c.Command...), c.Args...) {
				if strings.HasPrefix(a, "--instance-id") || strings.HasPrefix(a, "-instance-id") {
					t.Errorf("the container passes %q: the id must be the pod name", a)
				}
			}
			if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
				t.Errorf("podManagementPolicy %q: want Parallel (instances do not depend on each other's order)", sts.Spec.PodManagementPolicy)
			}
			if sts.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
				t.Errorf("updateStrategy %q: want RollingUpdate (OnDelete never rolls a new image out)", sts.Spec.UpdateStrategy.Type)
			}
			if len(sts.Spec.VolumeClaimTemplates) != 0 {
				t.Errorf("%d volumeClaimTemplates: Laneway keeps no state on disk", len(sts.Spec.VolumeClaimTemplates))
			}
			// The governing Service: headless, selecting the set's pods, and
			// not the Service clients and the ServiceMonitor use.
			gov := services(objs)[sts.Spec.ServiceName]
			switch {
			case gov == nil:
				t.Errorf("serviceName %q is not a Service of the build", sts.Spec.ServiceName)
			case gov.Spec.ClusterIP != corev1.ClusterIPNone:
				t.Errorf("Service %s (the StatefulSet's serviceName) is not headless: clusterIP %q", gov.Name, gov.Spec.ClusterIP)
			case !labels.SelectorFromSet(gov.Spec.Selector).Matches(labels.Set(pod.Labels)):
				t.Errorf("Service %s selects %v, not the pods %v", gov.Name, gov.Spec.Selector, pod.Labels)
			case gov.Name == apiService(t, objs).Name:
				t.Errorf("serviceName %s is the API Service: the headless one is separate", gov.Name)
			}
		})
	}
}
