package deploy_test

import (
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"sigs.k8s.io/yaml"
)

// embeddedNATS is the nats-server version the services embed and their
// tests run against: pkg/go.mod's.
func embeddedNATS(t *testing.T) string {
	t.Helper()
	f, err := modfile.Parse("pkg/go.mod", readFile(t, "pkg/go.mod"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == "github.com/nats-io/nats-server/v2" {
			return strings.TrimPrefix(r.Mod.Version, "v")
		}
	}
	t.Fatal("pkg/go.mod does not require nats-server")
	return ""
}

// TestNATSVersionPinned: compose and the Helm values run the nats-server
// the services are tested with (an older one rejects their message
// schedules), and a per-node version changes that node only, so an
// upgrade can roll.
func TestNATSVersionPinned(t *testing.T) {
	v := embeddedNATS(t)
	tests := []struct {
		name string
		env  []string
		want map[string]string // node -> image
	}{
		{"default", nil, map[string]string{"nats-1": "nats:" + v + "-alpine", "nats-2": "nats:" + v + "-alpine", "nats-3": "nats:" + v + "-alpine"}},
		{"NATS_VERSION moves all", []string{"NATS_VERSION=9.9.9"}, map[string]string{"nats-1": "nats:9.9.9-alpine", "nats-2": "nats:9.9.9-alpine", "nats-3": "nats:9.9.9-alpine"}},
		{"rolling: node 1 first", []string{"NATS_1_VERSION=9.9.9"}, map[string]string{"nats-1": "nats:9.9.9-alpine", "nats-2": "nats:" + v + "-alpine", "nats-3": "nats:" + v + "-alpine"}},
		{"rolling: node 2 over NATS_VERSION", []string{"NATS_VERSION=9.9.8", "NATS_2_VERSION=9.9.9"}, map[string]string{"nats-1": "nats:9.9.8-alpine", "nats-2": "nats:9.9.9-alpine", "nats-3": "nats:9.9.8-alpine"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadCompose(t, tt.env, "docker-compose.yml")
			for node, want := range tt.want {
				if got := service(t, p, node).Image; got != want {
					t.Errorf("%s: image %s, want %s", node, got, want)
				}
			}
		})
	}

	t.Run("helm nats values", func(t *testing.T) {
		var vals struct {
			Container struct {
				Image struct{ Repository, Tag string }
			}
			Config struct {
				Cluster struct {
					Enabled  bool
					Replicas int
				}
				JetStream struct{ Enabled bool }
			}
		}
		if err := yaml.Unmarshal(readFile(t, "deploy/helm/nats-values.yaml"), &vals); err != nil {
			t.Fatal(err)
		}
		if img := vals.Container.Image; img.Repository != "nats" || img.Tag != v+"-alpine" {
			t.Errorf("image %s:%s, want nats:%s-alpine", img.Repository, img.Tag, v)
		}
		if c := vals.Config; !c.Cluster.Enabled || c.Cluster.Replicas != 3 || !c.JetStream.Enabled {
			t.Errorf("cluster %+v, jetstream %+v: want a 3-node JetStream cluster", c.Cluster, c.JetStream)
		}
	})
}
