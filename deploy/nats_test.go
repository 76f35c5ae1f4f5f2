package deploy_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TestNATSConfig loads deploy/nats/nats.conf with nats-server's own parser
// and checks it against the compose cluster that runs it.
func TestNATSConfig(t *testing.T) {
	opts, err := server.ProcessConfigFile(filepath.Join(repoRoot, "deploy/nats/nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, nil, "docker-compose.yml")
	var routes []string
	for _, r := range opts.Routes {
		routes = append(routes, r.Hostname())
		if r.Port() != "6222" {
			t.Errorf("route %s: port %s, want the cluster port 6222", r, r.Port())
		}
	}
	slices.Sort(routes)
	if !slices.Equal(routes, natsNodes) {
		t.Errorf("routes to %v, want every compose node %v", routes, natsNodes)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"jetstream", opts.JetStream, true},
		{"store_dir (the compose volume)", opts.StoreDir, "/data"},
		{"client port (--nats of the services)", opts.Port, 4222},
		{"monitoring port (healthcheck, KEDA)", opts.HTTPPort, 8222},
		{"cluster name", opts.Cluster.Name, "nanofleet"},
		{"cluster port", opts.Cluster.Port, 6222},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if opts.JetStreamMaxStore <= 0 {
		t.Error("max_file_store unset: JetStream would fill the volume")
	}
	for _, node := range natsNodes {
		s := service(t, p, node)
		if s.StopSignal != "SIGUSR2" {
			t.Errorf("%s: stop_signal %q, want SIGUSR2 (lame duck mode)", node, s.StopSignal)
		}
		lameDuck := opts.LameDuckDuration + opts.LameDuckGracePeriod
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= lameDuck {
			t.Errorf("%s: stop_grace_period %v does not cover lame duck mode (%v)", node, s.StopGracePeriod, lameDuck)
		}
	}
}
