package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"
)

// kubeSchemaVersions are the Kubernetes releases whose OpenAPI schemas the
// rendered chart is validated against: the oldest the chart claims
// (Chart.yaml kubeVersion) and the newest. Their schemas come from the
// k8s.io/kubernetes module (api/openapi-spec/v3) through the Go module proxy.
var kubeSchemaVersions = []string{"v1.30.14", "v1.37.2"}

// TestChartMatchesKubernetesSchemas validates every rendered built-in object
// against the OpenAPI schema of its kind, strictly (an unknown field fails,
// as with kubeconform -strict), for each chart case and Kubernetes version.
// Custom resources (KEDA, Prometheus operator) have no schema there.
func TestChartMatchesKubernetesSchemas(t *testing.T) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	oldest := strings.Join(strings.Split(strings.TrimPrefix(kubeSchemaVersions[0], "v"), ".")[:2], ".")
	if want := ">=" + oldest + ".0-0"; chrt.Metadata.KubeVersion != want {
		t.Fatalf("Chart.yaml kubeVersion %q, want %q, the oldest version validated here", chrt.Metadata.KubeVersion, want)
	}
	for _, v := range kubeSchemaVersions {
		t.Run(v, func(t *testing.T) {
			schemas := loadKubeSchemas(t, v)
			for _, tc := range chartCases {
				t.Run(tc.name, func(t *testing.T) {
					m, err := renderChartFor(t, v, tc.valueFiles, tc.sets)
					if err != nil {
						t.Fatalf("render: %v", err)
					}
					validated := 0
					for _, o := range m.Objects {
						if customKinds[o.Kind] {
							continue
						}
						if err := schemas.validate(o); err != nil {
							t.Errorf("%s %s (%s): %v", o.Kind, o.Name, o.Source, err)
						}
						validated++
					}
					if validated == 0 {
						t.Error("no object validated")
					}
				})
			}
		})
	}
}

// kubeSchemas holds one Kubernetes version's OpenAPI v3 documents.
type kubeSchemas struct {
	dir      string
	compiler *jsonschema.Compiler
	loaded   map[string]bool // document URL
	compiled map[string]*jsonschema.Schema
}

func loadKubeSchemas(t *testing.T, version string) *kubeSchemas {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "mod", "download", "-json", "k8s.io/kubernetes@"+version)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download k8s.io/kubernetes@%s: %v\n%s", version, err, out)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download k8s.io/kubernetes@%s: %v: %s", version, err, out)
	}
	c := jsonschema.NewCompiler()
	return &kubeSchemas{dir: filepath.Join(mod.Dir, "api/openapi-spec/v3"), compiler: c,
		loaded: map[string]bool{}, compiled: map[string]*jsonschema.Schema{}}
}

// document returns the URL of the OpenAPI document of apiVersion, loading it
// with every object schema made strict.
func (k *kubeSchemas) document(apiVersion string) (string, map[string]any, error) {
	name := "api__v1_openapi.json"
	if group, version, ok := strings.Cut(apiVersion, "/"); ok {
		name = fmt.Sprintf("apis__%s__%s_openapi.json", group, version)
	}
	path := filepath.Join(k.dir, name)
	url := "file://" + path
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("no schema for %s: %w", apiVersion, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", nil, fmt.Errorf("%s: %w", name, err)
	}
	if !k.loaded[url] {
		strict(doc)
		if err := k.compiler.AddResource(url, doc); err != nil {
			return "", nil, fmt.Errorf("%s: %w", name, err)
		}
		k.loaded[url] = true
	}
	return url, doc, nil
}

// strict forbids properties a schema does not list, as kubeconform's
// strict schemas do; maps (additionalProperties set) keep theirs.
func strict(v any) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["properties"].(map[string]any); ok {
			if _, set := v["additionalProperties"]; !set {
				v["additionalProperties"] = false
			}
		}
		for _, c := range v {
			strict(c)
		}
	case []any:
		for _, c := range v {
			strict(c)
		}
	}
}

func (k *kubeSchemas) validate(o object) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	js, err := yaml.YAMLToJSON([]byte(o.Raw))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return err
	}
	key := head.APIVersion + "/" + head.Kind
	sch, ok := k.compiled[key]
	if !ok {
		url, doc, err := k.document(head.APIVersion)
		if err != nil {
			return err
		}
		name, err := schemaName(doc, head.APIVersion, head.Kind)
		if err != nil {
			return err
		}
		if sch, err = k.compiler.Compile(url + "#/components/schemas/" + name); err != nil {
			return fmt.Errorf("compile %s: %w", name, err)
		}
		k.compiled[key] = sch
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// schemaName finds the schema of kind by its x-kubernetes-group-version-kind.
func schemaName(doc map[string]any, apiVersion, kind string) (string, error) {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	comps, _ := doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	for name, s := range schemas {
		m, _ := s.(map[string]any)
		gvks, _ := m["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk, _ := g.(map[string]any)
			if gvk["group"] == group && gvk["version"] == version && gvk["kind"] == kind {
				return name, nil
			}
		}
	}
	return "", fmt.Errorf("no schema for %s %s", apiVersion, kind)
}

// TestKubeSchemasCatchMistakes: the validation above fails on what it is
// there to catch.
func TestKubeSchemasCatchMistakes(t *testing.T) {
	schemas := loadKubeSchemas(t, kubeSchemaVersions[0])
	tests := []struct {
		name, doc, want string
	}{
		{"valid", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n", ""},
		{"unknown field", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndatta:\n  k: v\n", "datta"},
		{"wrong type", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\nspec:\n  replicas: three\n  selector: {}\n  template: {}\n", "replicas"},
		{"missing required", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\nspec:\n  template: {}\n", "selector"},
		{"field newer than the version", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers: [{name: a, image: b}]\n  resources: {}\n", "resources"},
		{"unknown kind", "apiVersion: v1\nkind: Gadget\nmetadata:\n  name: a\n", "no schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := schemas.validate(object{Raw: tt.doc})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("valid object refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one naming %q", err, tt.want)
			}
		})
	}
}
