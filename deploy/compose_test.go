package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

var natsNodes = []string{"nats-1", "nats-2", "nats-3"}

// loadCompose loads compose files from the repository root as `docker
// compose` does, with env as the only environment (no .env, no OS
// variables), so that the defaults in the files are what is tested.
func loadCompose(t *testing.T, env []string, files ...string) *types.Project {
	t.Helper()
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(repoRoot, f)
	}
	opts, err := cli.NewProjectOptions(paths,
		cli.WithWorkingDirectory(repoRoot),
		cli.WithEnv(env),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(t.Context())
	if err != nil {
		t.Fatalf("load %v: %v", files, err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("compose: %v", err)
	}
	return s
}

func TestComposeFleet(t *testing.T) {
	tests := []struct {
		name         string
		files        []string
		env          []string
		workers      int
		runners      int
		wantServices []string
	}{
		{
			name:         "defaults",
			files:        []string{"docker-compose.yml"},
			workers:      3,
			runners:      2,
			wantServices: append(slices.Clone(natsNodes), services...),
		},
		{
			name:         "with observability",
			files:        []string{"docker-compose.yml", "docker-compose.observability.yml"},
			workers:      3,
			runners:      2,
			wantServices: append(append(slices.Clone(natsNodes), services...), "prometheus", "grafana"),
		},
		{
			name:         "scaled by .env",
			files:        []string{"docker-compose.yml"},
			env:          []string{"AGENT_WORKER_REPLICAS=8", "TOOL_RUNNER_REPLICAS=4"},
			workers:      8,
			runners:      4,
			wantServices: append(slices.Clone(natsNodes), services...),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadCompose(t, tt.env, tt.files...)
			got := p.ServiceNames()
			slices.Sort(got)
			want := slices.Clone(tt.wantServices)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("services %v, want %v", got, want)
			}
			for name, n := range map[string]int{"agent-worker": tt.workers, "tool-runner": tt.runners, "channel-gateway": 1, "memory-consolidator": 1} {
				if s := service(t, p, name); s.GetScale() != n {
					t.Errorf("%s: %d replicas, want %d", name, s.GetScale(), n)
				}
			}
			for _, s := range p.Services {
				if s.Restart == "" && (s.Deploy == nil || s.Deploy.RestartPolicy == nil) {
					t.Errorf("%s: no restart policy", s.Name)
				}
				if s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) < 2 {
					t.Errorf("%s: no healthcheck", s.Name)
				}
				for _, v := range s.Volumes {
					if v.Type == types.VolumeTypeBind {
						if _, err := os.Stat(v.Source); err != nil {
							t.Errorf("%s: bind mount source: %v", s.Name, err)
						}
					}
				}
			}
		})
	}
}

func TestComposeNATSCluster(t *testing.T) {
	p := loadCompose(t, nil, "docker-compose.yml")
	volumes := map[string]string{}
	for _, node := range natsNodes {
		s := service(t, p, node)
		if !strings.HasPrefix(s.Image, "nats:") {
			t.Errorf("%s: image %s, want the official nats image", node, s.Image)
		} else if v := strings.TrimPrefix(s.Image, "nats:"); !atLeast(v, 2, 12) {
			t.Errorf("%s: nats %s, want 2.12 or newer (atomic batch publish)", node, v)
		}
		if i := slices.Index(s.Command, "--name"); i < 0 || i+1 >= len(s.Command) || s.Command[i+1] != node {
			t.Errorf("%s: command %v does not name the server %s", node, s.Command, node)
		}
		if !slices.ContainsFunc(s.HealthCheck.Test, func(a string) bool { return strings.Contains(a, ":8222/healthz") }) {
			t.Errorf("%s: healthcheck %v does not ask the monitoring port", node, s.HealthCheck.Test)
		}
		var conf, data bool
		for _, v := range s.Volumes {
			switch {
			case v.Type == types.VolumeTypeBind && strings.HasSuffix(v.Source, filepath.FromSlash("deploy/nats/nats.conf")):
				conf = v.ReadOnly
			case v.Type == types.VolumeTypeVolume && v.Target == "/data":
				data = true
				if other, dup := volumes[v.Source]; dup {
					t.Errorf("%s and %s share the JetStream volume %s", node, other, v.Source)
				}
				volumes[v.Source] = node
			}
		}
		if !conf || !data {
			t.Errorf("%s: config mounted read-only: %v, JetStream store on a named volume: %v", node, conf, data)
		}
	}
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t, nil, "docker-compose.yml")
	stages := dockerfileStages(t)
	for _, name := range services {
		t.Run(name, func(t *testing.T) {
			s := service(t, p, name)
			if s.Build == nil || s.Build.Target != name || filepath.Base(s.Build.Dockerfile) != "Dockerfile" {
				t.Fatalf("build %+v, want target %s of deploy/docker/Dockerfile", s.Build, name)
			}
			if !slices.Contains(stages, name) {
				t.Errorf("the Dockerfile has no stage %s", name)
			}
			if !strings.Contains(s.Image, "/"+name+":") {
				t.Errorf("image %q, want <registry>/%s:<tag>", s.Image, name)
			}
			if uid, _, _ := strings.Cut(s.User, ":"); uid == "" || uid == "0" || uid == "root" {
				t.Errorf("user %q, want a non-root uid", s.User)
			}
			if !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") || !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
				t.Errorf("read_only %v, cap_drop %v, security_opt %v: want a read-only root, no capabilities, no new privileges", s.ReadOnly, s.CapDrop, s.SecurityOpt)
			}
			if s.Build.Args["VERSION"] == nil || s.Build.Args["REVISION"] == nil {
				t.Errorf("build args %v: want VERSION and REVISION, the images' labels", s.Build.Args)
			}
			for _, node := range natsNodes {
				if dep, ok := s.DependsOn[node]; !ok || dep.Condition != types.ServiceConditionHealthy {
					t.Errorf("does not wait for %s to be healthy", node)
				}
			}
			args := strings.Join(s.Command, " ")
			for _, node := range natsNodes {
				if !strings.Contains(args, "nats://"+node+":4222") {
					t.Errorf("command %q does not list %s", args, node)
				}
			}
			if !strings.Contains(args, "--http=:9090") || !strings.Contains(strings.Join(s.HealthCheck.Test, " "), "127.0.0.1:9090/healthz") {
				t.Errorf("command %q and healthcheck %v disagree on the /healthz port 9090", args, s.HealthCheck.Test)
			}
			if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) < 30*time.Second {
				t.Errorf("stop_grace_period %v, want at least 30s", s.StopGracePeriod)
			}
		})
	}

	gw := service(t, p, "channel-gateway")
	if !slices.ContainsFunc(gw.Ports, func(pc types.ServicePortConfig) bool { return pc.Target == 8080 && pc.Published == "8080" }) {
		t.Errorf("channel-gateway ports %+v, want 8080 published", gw.Ports)
	}
	if !slices.Contains(gw.Command, "--listen=:8080") {
		t.Errorf("channel-gateway command %v lacks --listen=:8080", gw.Command)
	}
	w := service(t, p, "agent-worker")
	if g := time.Duration(*w.StopGracePeriod); g < 660*time.Second {
		t.Errorf("agent-worker stop_grace_period %v, want the longest turn: at least 660s", g)
	}

	tr := service(t, p, "tool-runner")
	ws := slices.IndexFunc(tr.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == "/workspace" })
	if ws < 0 || tr.Volumes[ws].Type != types.VolumeTypeVolume {
		t.Fatalf("tool-runner volumes %+v, want a named volume at /workspace", tr.Volumes)
	}
	if _, ok := p.Volumes[tr.Volumes[ws].Source]; !ok {
		t.Errorf("tool-runner workspace volume %q is not declared", tr.Volumes[ws].Source)
	}
	for _, opt := range []string{"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} {
		if !slices.Contains(tr.SecurityOpt, opt) {
			t.Errorf("tool-runner security_opt %v lacks %s, which bubblewrap needs", tr.SecurityOpt, opt)
		}
	}
	for _, name := range services {
		if s := service(t, p, name); name != "tool-runner" && slices.ContainsFunc(s.SecurityOpt, func(o string) bool { return strings.Contains(o, "unconfined") }) {
			t.Errorf("%s relaxes its confinement (%v); only the tool-runner needs to", name, s.SecurityOpt)
		}
	}
}

// TestComposeSecrets: each service gets the secrets it uses and no other
// (the tool-runner runs model-chosen commands: it gets none), and the
// services that call a model can reach one on the host.
func TestComposeSecrets(t *testing.T) {
	model := []string{"NANOFLEET_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"}
	tests := []struct {
		service   string
		env       []string
		hostModel bool
	}{
		{"agent-worker", model, true},
		{"memory-consolidator", model, true},
		{"channel-gateway", []string{"SLACK_APP_TOKEN", "SLACK_BOT_TOKEN", "TELEGRAM_BOT_TOKEN"}, false},
		{"tool-runner", nil, false},
	}
	env := []string{"OPENAI_API_KEY=sk-x", "OPENAI_BASE_URL=http://host.docker.internal:11434/v1", "NANOFLEET_MODEL=m",
		"TELEGRAM_BOT_TOKEN=t", "SLACK_BOT_TOKEN=xoxb", "SLACK_APP_TOKEN=xapp"}
	p := loadCompose(t, env, "docker-compose.yml")
	for _, tt := range tests {
		t.Run(tt.service, func(t *testing.T) {
			s := service(t, p, tt.service)
			if len(s.EnvFiles) != 0 {
				t.Errorf("env_file %v hands the service every secret in it", s.EnvFiles)
			}
			var got []string
			for k, v := range s.Environment {
				got = append(got, k)
				if v == nil || *v == "" {
					t.Errorf("%s is not passed from the environment", k)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.env) {
				t.Errorf("environment %v, want %v", got, tt.env)
			}
			if hg := s.ExtraHosts["host.docker.internal"]; tt.hostModel != slices.Contains(hg, "host-gateway") {
				t.Errorf("extra_hosts %v: host.docker.internal as host-gateway wanted: %v", s.ExtraHosts, tt.hostModel)
			}
		})
	}
}

func TestComposeObservability(t *testing.T) {
	p := loadCompose(t, nil, "docker-compose.yml", "docker-compose.observability.yml")
	prom := service(t, p, "prometheus")
	if !slices.ContainsFunc(prom.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Target == "/etc/prometheus" && strings.HasSuffix(v.Source, filepath.FromSlash("deploy/prometheus"))
	}) {
		t.Errorf("prometheus does not mount deploy/prometheus at /etc/prometheus: %+v", prom.Volumes)
	}
	graf := service(t, p, "grafana")
	for target, src := range map[string]string{
		"/etc/grafana/provisioning":             "deploy/grafana/provisioning",
		"/var/lib/grafana/dashboards/nanofleet": "deploy/grafana/dashboards",
	} {
		if !slices.ContainsFunc(graf.Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Target == target && strings.HasSuffix(v.Source, filepath.FromSlash(src))
		}) {
			t.Errorf("grafana does not mount %s at %s", src, target)
		}
	}
	if dep, ok := graf.DependsOn["prometheus"]; !ok || dep.Condition != types.ServiceConditionHealthy {
		t.Error("grafana does not wait for prometheus")
	}
}

// TestEnvExampleDocumentsEverySetting: every ${VAR} the compose files read
// is listed in .env.example, and so is every variable the services read.
func TestEnvExampleDocumentsEverySetting(t *testing.T) {
	example := string(readFile(t, ".env.example"))
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#?([A-Z][A-Z0-9_]*)=`).FindAllStringSubmatch(example, -1) {
		documented[m[1]] = true
	}
	want := []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "NANOFLEET_MODEL", "TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"}
	for _, f := range []string{"docker-compose.yml", "docker-compose.observability.yml"} {
		for _, m := range regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*)`).FindAllStringSubmatch(string(readFile(t, f)), -1) {
			want = append(want, m[1])
		}
	}
	for _, v := range want {
		if !documented[v] {
			t.Errorf(".env.example does not list %s", v)
		}
	}
}

// atLeast reports whether an image tag such as "2.12-alpine" or "2.14.1"
// is version major.minor or newer.
func atLeast(tag string, major, minor int) bool {
	m := regexp.MustCompile(`^(\d+)\.(\d+)`).FindStringSubmatch(tag)
	if m == nil {
		return false
	}
	gotMajor, _ := strconv.Atoi(m[1])
	gotMinor, _ := strconv.Atoi(m[2])
	return gotMajor > major || gotMajor == major && gotMinor >= minor
}
