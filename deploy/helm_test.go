package deploy_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir     = "helm/nanofleet"
	releaseName  = "nanofleet"
	releaseNS    = "nanofleet"
	workerDeploy = "nanofleet-agent-worker"
)

// object is one rendered manifest: its kind, name and the typed value it
// decoded into (a k8s.io/api type, or map[string]any for custom resources).
type object struct {
	Source string
	Kind   string // apiVersion/kind
	Name   string
	Value  any
	Raw    string // the rendered YAML document
}

// manifest is a rendered release, indexed for the checks.
type manifest struct {
	Objects []object
	Notes   string
}

// builtinKinds are the Kubernetes types the chart may render; an object of
// any other kind fails the test, so a new template needs a decoder here.
var builtinKinds = map[string]func() any{
	"v1/ConfigMap":                           func() any { return new(corev1.ConfigMap) },
	"v1/PersistentVolumeClaim":               func() any { return new(corev1.PersistentVolumeClaim) },
	"v1/Secret":                              func() any { return new(corev1.Secret) },
	"v1/Service":                             func() any { return new(corev1.Service) },
	"v1/ServiceAccount":                      func() any { return new(corev1.ServiceAccount) },
	"apps/v1/Deployment":                     func() any { return new(appsv1.Deployment) },
	"autoscaling/v2/HorizontalPodAutoscaler": func() any { return new(autoscalingv2.HorizontalPodAutoscaler) },
	"networking.k8s.io/v1/Ingress":           func() any { return new(networkingv1.Ingress) },
	"networking.k8s.io/v1/NetworkPolicy":     func() any { return new(networkingv1.NetworkPolicy) },
	"policy/v1/PodDisruptionBudget":          func() any { return new(policyv1.PodDisruptionBudget) },
}

// customKinds are CRDs whose Go types would drag in their operators; they
// are decoded as maps and checked field by field.
var customKinds = map[string]bool{
	"keda.sh/v1alpha1/ScaledObject":       true,
	"monitoring.coreos.com/v1/PodMonitor": true,
}

// renderChart renders the chart as `helm template` does (client-only
// install, dry run) with the given values files (relative to the chart)
// and --set style overrides.
func renderChart(t *testing.T, valueFiles []string, sets []string) (*manifest, error) {
	t.Helper()
	return renderChartFor(t, kubeSchemaVersions[len(kubeSchemaVersions)-1], valueFiles, sets)
}

// renderChartFor renders the chart for a cluster of kubeVersion (vMAJOR.MINOR.PATCH).
func renderChartFor(t *testing.T, kubeVersion string, valueFiles []string, sets []string) (*manifest, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	opts := values.Options{Values: sets}
	for _, f := range valueFiles {
		opts.ValueFiles = append(opts.ValueFiles, filepath.Join(chartDir, f))
	}
	vals, err := opts.MergeValues(getter.Providers{})
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	major, minor, _ := strings.Cut(strings.TrimPrefix(kubeVersion, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	caps.KubeVersion = chartutil.KubeVersion{Version: kubeVersion, Major: major, Minor: minor}
	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: caps,
		Log:          func(string, ...any) {},
	}
	install := action.NewInstall(cfg)
	install.DryRun = true
	install.ClientOnly = true
	install.KubeVersion = &caps.KubeVersion
	install.Replace = true
	install.ReleaseName = releaseName
	install.Namespace = releaseNS
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return nil, err
	}
	m := &manifest{Notes: rel.Info.Notes}
	docs := releaseutil.SplitManifests(rel.Manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	for _, k := range keys {
		obj, ok, err := decodeStrict(docs[k])
		if err != nil {
			t.Fatalf("%s:\n%s\n%v", k, docs[k], err)
		}
		if ok {
			m.Objects = append(m.Objects, obj)
		}
	}
	return m, nil
}

// decodeStrict decodes one YAML document into its API type, failing on
// unknown or duplicate fields. ok is false for an empty document.
func decodeStrict(doc string) (obj object, ok bool, err error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
		return obj, false, err
	}
	if head.APIVersion == "" && head.Kind == "" {
		return obj, false, nil // a template that rendered nothing but comments
	}
	obj = object{Kind: head.APIVersion + "/" + head.Kind, Name: head.Metadata.Name, Raw: doc}
	if first, _, _ := strings.Cut(strings.TrimPrefix(doc, "---\n"), "\n"); strings.HasPrefix(first, "# Source: ") {
		obj.Source = strings.TrimPrefix(first, "# Source: ")
	}
	if newValue, ok := builtinKinds[obj.Kind]; ok {
		obj.Value = newValue()
	} else if customKinds[obj.Kind] {
		obj.Value = &map[string]any{}
	} else {
		return obj, false, fmt.Errorf("no decoder for %s: add it to builtinKinds or customKinds", obj.Kind)
	}
	if err := yaml.UnmarshalStrict([]byte(doc), obj.Value); err != nil {
		return obj, false, fmt.Errorf("%s %s does not decode strictly: %w", obj.Kind, obj.Name, err)
	}
	return obj, true, nil
}

// all returns the objects of type T.
func all[T any](m *manifest) []T {
	var out []T
	for _, o := range m.Objects {
		if v, ok := o.Value.(*T); ok {
			out = append(out, *v)
		}
	}
	return out
}

func (m *manifest) custom(kind string) []map[string]any {
	var out []map[string]any
	for _, o := range m.Objects {
		if o.Kind == kind {
			out = append(out, *o.Value.(*map[string]any))
		}
	}
	return out
}

func (m *manifest) count() map[string]int {
	n := map[string]int{}
	for _, o := range m.Objects {
		n[o.Kind]++
	}
	return n
}

func deployment(t *testing.T, m *manifest, name string) appsv1.Deployment {
	t.Helper()
	for _, d := range all[appsv1.Deployment](m) {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no Deployment %s", name)
	return appsv1.Deployment{}
}

// chartCase is one way of installing the chart and what it must produce.
type chartCase struct {
	name       string
	valueFiles []string
	sets       []string
	kinds      map[string]int // expected count per apiVersion/kind
	prefix     string         // nats.prefix
	graceTurn  int64          // agent-worker terminationGracePeriodSeconds
	workers    *int32         // agent-worker replicas; nil when autoscaled
	notes      string         // NOTES.txt must contain this
	secrets    []string       // Secrets the operator provides (values name them)
}

func ptr[T any](v T) *T { return &v }

var chartCases = []chartCase{
	{
		name: "default values",
		kinds: map[string]int{
			"apps/v1/Deployment": 4, "policy/v1/PodDisruptionBudget": 4, "networking.k8s.io/v1/NetworkPolicy": 4,
			"v1/Service": 1, "v1/ServiceAccount": 1, "v1/ConfigMap": 1, "v1/Secret": 1, "v1/PersistentVolumeClaim": 1,
			"autoscaling/v2/HorizontalPodAutoscaler": 1,
		},
		prefix:    "nanofleet",
		graceTurn: 660,
		notes:     "a CPU HorizontalPodAutoscaler",
	},
	{
		name:       "production values",
		valueFiles: []string{"values-production.yaml"},
		kinds: map[string]int{
			"apps/v1/Deployment": 4, "policy/v1/PodDisruptionBudget": 4, "networking.k8s.io/v1/NetworkPolicy": 4,
			"v1/Service": 1, "v1/ServiceAccount": 1, "v1/ConfigMap": 2, "v1/PersistentVolumeClaim": 1,
			"networking.k8s.io/v1/Ingress": 1, "keda.sh/v1alpha1/ScaledObject": 1, "monitoring.coreos.com/v1/PodMonitor": 1,
		},
		prefix:    "nanofleet",
		graceTurn: 660,
		notes:     "KEDA on the inbound lag",
		secrets:   []string{"nanofleet-tokens", "nanofleet-nats"},
	},
	{
		name:       "production values, other prefix and longer turns",
		valueFiles: []string{"values-production.yaml"},
		sets:       []string{"nats.prefix=team-a", "agentWorker.terminationGracePeriodSeconds=1260"},
		kinds:      map[string]int{"keda.sh/v1alpha1/ScaledObject": 1},
		prefix:     "team-a",
		graceTurn:  1260,
		notes:      "inbound stream TEAM_A_IN",
		secrets:    []string{"nanofleet-tokens", "nanofleet-nats"},
	},
	{
		name: "fixed replicas, no policies, per-pod workspace",
		sets: []string{
			"agentWorker.autoscaling.enabled=false", "networkPolicy.enabled=false", "topologySpread.enabled=false",
			"toolRunner.workspace.type=emptyDir", "gateway.pdb.enabled=false", "secrets.values.OPENAI_API_KEY=sk-test",
			"nats.credentials.existingSecret=nats-creds", "toolRunner.sandbox.hostUsers=false", "toolRunner.sandbox.procMountUnmasked=true",
		},
		kinds: map[string]int{
			"apps/v1/Deployment": 4, "policy/v1/PodDisruptionBudget": 3, "networking.k8s.io/v1/NetworkPolicy": 0,
			"v1/Secret": 1, "v1/PersistentVolumeClaim": 0, "autoscaling/v2/HorizontalPodAutoscaler": 0,
		},
		prefix:    "nanofleet",
		graceTurn: 660,
		workers:   ptr[int32](3),
		secrets:   []string{"nats-creds"},
	},
	{
		name:      "only the workers",
		sets:      []string{"gateway.enabled=false", "toolRunner.enabled=false", "memoryConsolidator.enabled=false"},
		kinds:     map[string]int{"apps/v1/Deployment": 1, "v1/Service": 0, "v1/PersistentVolumeClaim": 0, "policy/v1/PodDisruptionBudget": 1},
		prefix:    "nanofleet",
		graceTurn: 660,
	},
}

func TestChartRenders(t *testing.T) {
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := renderChart(t, tc.valueFiles, tc.sets)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			got := m.count()
			for kind, want := range tc.kinds {
				if got[kind] != want {
					t.Errorf("%d %s, want %d (rendered: %v)", got[kind], kind, want, got)
				}
			}
			if !strings.Contains(m.Notes, tc.notes) {
				t.Errorf("NOTES.txt does not mention %q:\n%s", tc.notes, m.Notes)
			}
			checkNames(t, m)
			checkDeployments(t, m)
			checkSelectorsMatch(t, m)
			checkReferences(t, m, tc.secrets)
			checkAutoscaling(t, m, tc.prefix)
			w := deployment(t, m, workerDeploy)
			if g := w.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != tc.graceTurn {
				t.Errorf("agent-worker terminationGracePeriodSeconds = %v, want %d", g, tc.graceTurn)
			}
			if !equalPtr(w.Spec.Replicas, tc.workers) {
				t.Errorf("agent-worker replicas = %v, want %v (nil: owned by the autoscaler)", deref(w.Spec.Replicas), deref(tc.workers))
			}
		})
	}
}

// TestChartRejectsBadValues: values.schema.json catches typos and values
// the services would refuse, before anything reaches the cluster.
func TestChartRejectsBadValues(t *testing.T) {
	tests := []struct {
		name    string
		sets    []string
		wantErr string
	}{
		{"misspelt key", []string{"agentWorker.replica=3"}, "replica"},
		{"unknown top-level key", []string{"worker.replicas=3"}, "worker"},
		{"prefix with a dot", []string{"nats.prefix=nano.fleet"}, "prefix"},
		{"not a NATS URL", []string{"nats.url=http://nats:4222"}, "url"},
		{"negative replicas", []string{"toolRunner.replicas=-1"}, "replicas"},
		{"unknown workspace type", []string{"toolRunner.workspace.type=hostPath"}, "type"},
		{"bad pull policy", []string{"image.pullPolicy=Sometimes"}, "pullPolicy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderChart(t, nil, tt.sets)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("render with %v: %v, want a schema error mentioning %q", tt.sets, err, tt.wantErr)
			}
		})
	}
}

// TestChartDashboardMatchesCompose: the chart ships a copy of the Grafana
// dashboard (Helm cannot read files outside the chart); it must not drift.
func TestChartDashboardMatchesCompose(t *testing.T) {
	chartCopy := readFile(t, "deploy/helm/nanofleet/files/nanofleet-dashboard.json")
	canonical := readFile(t, "deploy/grafana/dashboards/nanofleet.json")
	if string(chartCopy) != string(canonical) {
		t.Fatal("deploy/helm/nanofleet/files/nanofleet-dashboard.json differs from deploy/grafana/dashboards/nanofleet.json: copy it over")
	}
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func containerPortNames(spec corev1.PodSpec) []string {
	var names []string
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// TestServiceConfig: the config files the deployments mount load with the
// services' own loader (strict: a misspelt key fails) and replicate the
// fleet's state on the three NATS servers.
func TestServiceConfig(t *testing.T) {
	chartConfig := func(valueFiles ...string) string {
		m, err := renderChart(t, valueFiles, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range all[corev1.ConfigMap](m) {
			if data, ok := cm.Data["config.json"]; ok {
				path := filepath.Join(t.TempDir(), "config.json")
				if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
				return path
			}
		}
		t.Fatal("no ConfigMap holds config.json")
		return ""
	}
	tests := []struct {
		name string
		path string
	}{
		{"compose", filepath.Join(repoRoot, "deploy/config/config.json")},
		{"chart defaults", chartConfig()},
		{"chart production", chartConfig("values-production.yaml")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := config.Load(tt.path, func(string) string { return "" }, false)
			if err != nil {
				t.Fatal(err)
			}
			if f.NATS.Replicas != 3 {
				t.Errorf("nats.replicas = %d, want 3 (one per NATS server)", f.NATS.Replicas)
			}
		})
	}
}
