package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// composeProject is the compose project the test runs, apart from a
// user's "nanofleet".
const composeProject = "nanofleet-composetest"

// TestComposeUp runs the project's docker-compose.yml for real: it starts
// dockerd if none runs, makes the base images offline
// (deploy/offline/base-images.sh), builds the compose plugin
// (deploy/offline/compose-plugin.sh), builds the images with the project's
// Dockerfile, brings the fleet up and drives turns through it while
// containers are killed and replaced. It takes minutes and root, so it runs
// only under `make compose-test` (NANOFLEET_COMPOSE_TEST=1).
func TestComposeUp(t *testing.T) {
	if os.Getenv("NANOFLEET_COMPOSE_TEST") == "" {
		t.Skip("starts a container engine and builds images for minutes: run `make compose-test` (NANOFLEET_COMPOSE_TEST=1)")
	}
	ctx := t.Context()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	startEngine(t)
	// Independent and slow from cold: side by side.
	step(t, "base images and compose plugin", func() {
		errs := make(chan error, 2)
		for _, script := range []string{"deploy/offline/base-images.sh", "deploy/offline/compose-plugin.sh"} {
			go func() {
				start := time.Now()
				_, err := runErr(ctx, root, nil, script)
				t.Logf("%s: %s", script, time.Since(start).Round(time.Second))
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})

	model := startModel(t)
	cli := filepath.Join(t.TempDir(), "nanofleet")
	step(t, "nanofleet CLI", func() {
		run(t, ctx, filepath.Join(root, "services/nanofleet"), []string{"CGO_ENABLED=0"}, "go", "build", "-o", cli, ".")
	})

	// The service config: the repository's, plus the OpenAI API channel.
	dir := t.TempDir()
	const apiToken = "composetest-token"
	conf := filepath.Join(dir, "config.json")
	writeJSON(t, conf, map[string]any{
		"nats":     map[string]any{"replicas": 3},
		"tools":    map[string]any{"workspace": map[string]any{"root": "/workspace"}},
		"channels": map[string]any{"api": map[string]any{"enabled": true, "token": apiToken}},
	})
	emptyEnv := filepath.Join(dir, "env")
	if err := os.WriteFile(emptyEnv, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const version = "composetest-1"
	fleet := &composeFleet{t: t, root: root, envFile: emptyEnv, env: []string{
		"NANOFLEET_CONFIG=" + conf,
		"NANOFLEET_HTTP_PORT=127.0.0.1:0",
		"NATS_HOST_PORT=0",
		"NANOFLEET_VERSION=" + version,
		"OPENAI_BASE_URL=" + model.containerURL,
		"OPENAI_API_KEY=sk-composetest",
		"NANOFLEET_MODEL=composetest-model",
	}}
	t.Cleanup(fleet.down)

	step(t, "compose up", func() { fleet.compose(ctx, "up", "-d", "--build", "--wait", "--wait-timeout", "600") })
	fleet.requireHealthy(ctx, 10)
	if got := strings.TrimSpace(dockerOut(t, ctx, "image", "inspect", "-f", `{{index .Config.Labels "org.opencontainers.image.version"}}`, "ghcr.io/nanofleet/agent-worker:latest")); got != version {
		t.Errorf("agent-worker image labelled version %q, want %q (build args)", got, version)
	}

	turns := &turnLog{}
	ask := func(ctx context.Context, how, text string) {
		turns.check(t, text, fleet.ask(ctx, cli, how, text))
	}
	t.Run("cli turn", func(t *testing.T) { ask(ctx, "cli", "hello from the cli") })
	t.Run("api turn", func(t *testing.T) { ask(ctx, "api", "hello from the api") })
	t.Run("exec turn", func(t *testing.T) {
		reply := fleet.ask(ctx, cli, "cli", "exec: echo sandboxed-$((6*7))")
		if !strings.Contains(reply, "sandboxed-42") {
			t.Errorf("exec turn replied %q, want the command's output sandboxed-42", reply)
		}
	})

	t.Run("agent-worker killed mid-turn", func(t *testing.T) {
		text := "slow: kill the worker"
		done := goAsk(ctx, fleet, cli, "cli", text)
		holder := model.waitSlow(t, text)
		c := fleet.containerByIP(ctx, holder)
		if !strings.Contains(c, "agent-worker") {
			t.Fatalf("the model was called from %s (%s), not an agent-worker", holder, c)
		}
		docker(t, ctx, "kill", c)
		turns.check(t, text, waitReply(t, done))
		if ips := model.callers(text); len(ips) < 2 {
			t.Errorf("the killed turn reached the model from %v only: it was not taken over by another worker", ips)
		}
		fleet.compose(ctx, "up", "-d", "--wait", "--wait-timeout", "300", "agent-worker")
	})

	t.Run("NATS node upgraded mid-turn", func(t *testing.T) {
		// A rolling upgrade of one node: a new tag for nats-2 only.
		img := strings.TrimSpace(fleet.composeOut(ctx, "config", "--images"))
		nats := ""
		for _, l := range strings.Split(img, "\n") {
			if strings.HasPrefix(l, "nats:") {
				nats = l
			}
		}
		ver := strings.TrimSuffix(strings.TrimPrefix(nats, "nats:"), "-alpine")
		docker(t, ctx, "tag", nats, "nats:"+ver+"-rolling-alpine")
		before := fleet.containerIDs(ctx)
		text := "slow: restart a nats node"
		done := goAsk(ctx, fleet, cli, "cli", text)
		model.waitSlow(t, text)
		fleet.env = append(fleet.env, "NATS_2_VERSION="+ver+"-rolling")
		fleet.compose(ctx, "up", "-d", "--wait", "--wait-timeout", "300")
		after := fleet.containerIDs(ctx)
		for name, c := range before {
			if changed := after[name] != c; changed != (c[0] == "nats-2") {
				t.Errorf("%s recreated: %v; only nats-2 should be", name, changed)
			}
		}
		turns.check(t, text, waitReply(t, done))
		ask(ctx, "cli", "after the nats upgrade")
	})

	t.Run("gateway recreated", func(t *testing.T) {
		fleet.compose(ctx, "up", "-d", "--wait", "--wait-timeout", "300", "--no-deps", "--force-recreate", "channel-gateway")
		ask(ctx, "api", "after the gateway was recreated")
	})

	t.Run("every stream R3", func(t *testing.T) {
		js := fleet.jetStream(ctx)
		n := 0
		for s := range js.ListStreams(ctx).Info() {
			n++
			if s.Config.Replicas != 3 {
				t.Errorf("stream %s: %d replicas, want 3", s.Config.Name, s.Config.Replicas)
			}
			if s.Cluster == nil || len(s.Cluster.Replicas)+1 < 3 {
				t.Errorf("stream %s: cluster %+v, want a leader and two current replicas", s.Config.Name, s.Cluster)
			}
		}
		if n == 0 {
			t.Error("no streams")
		}
	})
	t.Run("every message answered once", func(t *testing.T) { turns.requireOnce(t, ctx, fleet.jetStream(ctx)) })
	fleet.requireHealthy(ctx, 10)
}

// step runs f and logs how long it took.
func step(t *testing.T, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	t.Logf("%s: %s", what, time.Since(start).Round(time.Second))
}

// startEngine makes sure a docker daemon answers, starting dockerd (and
// stopping it at the end) when none runs. The test is skipped only when no
// engine can start.
func startEngine(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no container engine: the docker CLI is not installed (apt-get install docker.io)")
	}
	if exec.Command("docker", "info").Run() == nil {
		return
	}
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		t.Skip("no container engine: dockerd is not installed (apt-get install docker.io)")
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "dockerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	// dockerd says READY=1 on $NOTIFY_SOCKET (systemd's protocol) once its
	// API serves: the wait is for that word, not a poll of docker info.
	ready, err := notifyReady(t)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dockerd)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+ready.path)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("no container engine: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	select {
	case err := <-exited:
		log, _ := os.ReadFile(logf.Name())
		t.Skipf("no container engine: dockerd exited (%v):\n%s", err, tail(log, 20))
	case <-time.After(60 * time.Second):
		log, _ := os.ReadFile(logf.Name())
		t.Fatalf("dockerd did not say it was ready within 60s:\n%s", tail(log, 20))
	case <-ready.c:
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(logf.Name())
		t.Fatalf("dockerd said it was ready, but docker info failed: %v\n%s\ndockerd:\n%s", err, out, tail(log, 20))
	}
}

// readiness is a notify socket that c is closed on when a process sends
// READY=1 to it.
type readiness struct {
	path string
	c    chan struct{}
}

// notifyReady listens on a new notify socket until the end of the test.
func notifyReady(t *testing.T) (*readiness, error) {
	// A short directory: a socket's path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "nfnotify")
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	r := &readiness{path: filepath.Join(dir, "notify"), c: make(chan struct{})}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: r.path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return // closed at the end of the test
			}
			if slices.Contains(strings.Split(string(buf[:n]), "\n"), "READY=1") {
				close(r.c)
				return
			}
		}
	}()
	return r, nil
}

func tail(b []byte, lines int) string {
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// run runs a command in dir and fails the test with its output if it fails.
func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(ctx, dir, env, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runErr runs a command in dir; its error carries the end of its output.
func runErr(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out, 60))
	}
	return string(out), nil
}

func docker(t *testing.T, ctx context.Context, args ...string) {
	t.Helper()
	run(t, ctx, "", nil, "docker", args...)
}

func dockerOut(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	// Readable by the services' uid 65532 through the bind mount.
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// composeFleet is the compose project under test.
type composeFleet struct {
	t       *testing.T
	root    string
	envFile string
	env     []string
}

func (f *composeFleet) args(args []string) []string {
	return append([]string{"compose", "--project-directory", f.root, "-f", filepath.Join(f.root, "docker-compose.yml"),
		"-p", composeProject, "--env-file", f.envFile}, args...)
}

func (f *composeFleet) compose(ctx context.Context, args ...string) {
	f.t.Helper()
	run(f.t, ctx, f.root, f.env, "docker", f.args(args)...)
}

func (f *composeFleet) composeOut(ctx context.Context, args ...string) string {
	f.t.Helper()
	cmd := exec.CommandContext(ctx, "docker", f.args(args)...)
	cmd.Dir = f.root
	cmd.Env = append(os.Environ(), f.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		f.t.Fatalf("docker compose %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// down removes the project, its volumes and its network, and logs the
// services' output first when the test failed.
func (f *composeFleet) down() {
	// Not t.Context(): down runs as a cleanup, when it is already cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if f.t.Failed() {
		cmd := exec.CommandContext(ctx, "docker", f.args([]string{"logs", "--no-color", "--tail", "40"})...)
		cmd.Env = append(os.Environ(), f.env...)
		out, _ := cmd.CombinedOutput()
		f.t.Logf("compose logs:\n%s", out)
	}
	cmd := exec.CommandContext(ctx, "docker", f.args([]string{"down", "-v", "--remove-orphans", "--timeout", "30"})...)
	cmd.Env = append(os.Environ(), f.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Errorf("compose down: %v\n%s", err, out)
	}
}

type psEntry struct {
	Name    string
	Service string
	State   string
	Health  string
	ID      string
}

func (f *composeFleet) ps(ctx context.Context) []psEntry {
	f.t.Helper()
	var out []psEntry
	sc := bufio.NewScanner(strings.NewReader(f.composeOut(ctx, "ps", "--all", "--format", "json")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		// Compose prints one object a line (a JSON array in old versions).
		if strings.HasPrefix(line, "[") {
			var all []psEntry
			if err := json.Unmarshal([]byte(line), &all); err != nil {
				f.t.Fatalf("compose ps: %v", err)
			}
			out = append(out, all...)
			continue
		}
		var e psEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			f.t.Fatalf("compose ps: %v: %s", err, line)
		}
		out = append(out, e)
	}
	return out
}

func (f *composeFleet) requireHealthy(ctx context.Context, want int) {
	f.t.Helper()
	ps := f.ps(ctx)
	healthy := 0
	for _, c := range ps {
		if c.State == "running" && c.Health == "healthy" {
			healthy++
		} else {
			f.t.Errorf("%s: %s, %s", c.Name, c.State, c.Health)
		}
	}
	if healthy != want {
		f.t.Fatalf("%d containers healthy, want %d", healthy, want)
	}
}

// containerIDs maps each container name to its service and id.
func (f *composeFleet) containerIDs(ctx context.Context) map[string][2]string {
	ids := map[string][2]string{}
	for _, c := range f.ps(ctx) {
		ids[c.Name] = [2]string{c.Service, c.ID}
	}
	return ids
}

// containerByIP names the project's container with that address.
func (f *composeFleet) containerByIP(ctx context.Context, ip string) string {
	f.t.Helper()
	for _, c := range f.ps(ctx) {
		addrs := dockerOut(f.t, ctx, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", c.ID)
		if slices.Contains(strings.Fields(addrs), ip) {
			return c.Name
		}
	}
	f.t.Fatalf("no container has the address %s", ip)
	return ""
}

func (f *composeFleet) port(ctx context.Context, service string, port int) string {
	f.t.Helper()
	addr := strings.TrimSpace(f.composeOut(ctx, "port", service, fmt.Sprint(port)))
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		f.t.Fatalf("compose port %s %d: %q: %v", service, port, addr, err)
	}
	return p
}

func (f *composeFleet) jetStream(ctx context.Context) jetstream.JetStream {
	f.t.Helper()
	nc, err := nats.Connect("nats://127.0.0.1:" + f.port(ctx, "nats-1", 4222))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		f.t.Fatal(err)
	}
	return js
}

// ask sends text through the CLI (a client-only connection to NATS, as a
// user on the host runs it) or the gateway's OpenAI API, and returns the
// reply. Errors are returned as the reply text, so the caller's check
// names them.
func (f *composeFleet) ask(ctx context.Context, cli, how, text string) string {
	return f.asker(ctx, cli, how)(ctx, text)
}

// asker is [composeFleet.ask] in two steps: what may fail the test (the
// ports, a home for the CLI) is done at once, on the test's goroutine;
// the function it returns may run on another.
func (f *composeFleet) asker(ctx context.Context, cli, how string) func(ctx context.Context, text string) string {
	f.t.Helper()
	switch how {
	case "cli":
		natsURL, home := "nats://127.0.0.1:"+f.port(ctx, "nats-1", 4222), f.t.TempDir()
		return func(ctx context.Context, text string) string { return askCLI(ctx, cli, natsURL, home, text) }
	case "api":
		api := "http://127.0.0.1:" + f.port(ctx, "channel-gateway", 8080) + "/v1/chat/completions"
		return func(ctx context.Context, text string) string { return askAPI(ctx, api, text) }
	}
	panic("ask " + how)
}

func askCLI(ctx context.Context, cli, natsURL, home, text string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	{
		cmd := exec.CommandContext(ctx, cli, "agent", "--nats", natsURL, "--session", "cli:composetest", "-m", text)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		cmd.WaitDelay = 10 * time.Second
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Sprintf("nanofleet agent: %v: %s", err, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
}

func askAPI(ctx context.Context, api, text string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	{
		body, _ := json.Marshal(map[string]any{
			"model":    "nanofleet",
			"messages": []map[string]string{{"role": "user", "content": text}},
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api, bytes.NewReader(body))
		if err != nil {
			return err.Error()
		}
		req.Header.Set("Authorization", "Bearer composetest-token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || len(out.Choices) != 1 {
			return fmt.Sprintf("API %s: %s", resp.Status, b)
		}
		return out.Choices[0].Message.Content
	}
}

func goAsk(ctx context.Context, f *composeFleet, cli, how, text string) <-chan string {
	done := make(chan string, 1)
	ask := f.asker(ctx, cli, how)
	go func() { done <- ask(ctx, text) }()
	return done
}

func waitReply(t *testing.T, done <-chan string) string {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(4 * time.Minute):
		t.Fatal("no reply within 4 minutes")
		return ""
	}
}

// turnLog keeps the messages sent and the reply each got.
type turnLog struct {
	mu      sync.Mutex
	replies map[string]string
}

func (l *turnLog) check(t *testing.T, text, reply string) {
	t.Helper()
	l.mu.Lock()
	if l.replies == nil {
		l.replies = map[string]string{}
	}
	l.replies[text] = reply
	l.mu.Unlock()
	if want := "echo: " + text; !strings.Contains(reply, want) {
		t.Errorf("%q answered %q, want %q", text, reply, want)
	}
}

// requireOnce reads every reply the fleet published (the outbound stream
// keeps them) and requires exactly one final reply to each message sent,
// whatever was killed or replaced on the way, and no error reply.
func (l *turnLog) requireOnce(t *testing.T, ctx context.Context, js jetstream.JetStream) {
	t.Helper()
	stream, err := js.Stream(ctx, "NANOFLEET_OUT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	finals := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("NANOFLEET_OUT message %d: %v", seq, err)
		}
		var out nanofleetv1.OutboundMessage
		if err := proto.Unmarshal(msg.Data, &out); err != nil {
			t.Fatalf("%s: %v", msg.Subject, err)
		}
		switch out.GetKind() {
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR:
			t.Errorf("error reply on %s: %q", msg.Subject, out.GetContent())
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL:
			finals[out.GetContent()]++
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for text := range l.replies {
		n := 0
		for content, c := range finals {
			if strings.Contains(content, "echo: "+text) {
				n += c
			}
		}
		if n != 1 {
			t.Errorf("%q: %d final replies in the outbound stream, want exactly 1", text, n)
		}
	}
}

// fakeModel is llmtest's OpenAI server behind a proxy on the docker bridge,
// which the containers reach as host.docker.internal: a model server on the
// host as a user runs one. The proxy notes which container calls.
type fakeModel struct {
	srv          *llmtest.Server
	containerURL string

	mu    sync.Mutex
	calls map[string][]string // "slow:" message -> caller addresses
	slow  chan string
}

func startModel(t *testing.T) *fakeModel {
	t.Helper()
	m := &fakeModel{srv: llmtest.NewServer(t), calls: map[string][]string{}, slow: make(chan string, 16)}
	m.srv.Handle(m.script)
	upstream, err := url.Parse(m.srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: upstream.Scheme, Host: upstream.Host})
	proxy.FlushInterval = -1

	// host-gateway is the default bridge's address; listen there only.
	gw := strings.TrimSpace(dockerOut(t, t.Context(), "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", "bridge"))
	l, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatalf("listen on the docker bridge: %v", err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if i := bytes.Index(body, []byte("slow: ")); i >= 0 && r.URL.Path == "/v1/chat/completions" {
			var req llmtest.RecordedRequest
			if json.Unmarshal(body, &req.ChatCompletionRequest) == nil {
				text := req.LastUserText()
				if j := strings.Index(text, "slow: "); j >= 0 {
					ip, _, _ := net.SplitHostPort(r.RemoteAddr)
					m.mu.Lock()
					m.calls[text[j:]] = append(m.calls[text[j:]], ip)
					m.mu.Unlock()
					m.slow <- text[j:] + "\x00" + ip
				}
			}
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	m.containerURL = fmt.Sprintf("http://host.docker.internal:%d/v1", l.Addr().(*net.TCPAddr).Port)
	return m
}

// script answers "exec: CMD" with an exec tool call, holds the first call
// of a "slow: ..." message long enough for the test to break something,
// and echoes everything else.
func (m *fakeModel) script(req *llmtest.RecordedRequest) llmtest.Reply {
	text := req.LastUserText()
	last := req.LastMessage()
	switch {
	case last.Role == "user" && strings.Contains(text, "exec: "):
		cmd := text[strings.Index(text, "exec: ")+len("exec: "):]
		args, _ := json.Marshal(map[string]string{"command": cmd})
		return llmtest.ToolCalls(llmtest.Call("exec", string(args)))
	case last.Role == "user" && strings.Contains(text, "slow: "):
		reply := llmtest.Echo(req)
		m.mu.Lock()
		first := len(m.calls[text[strings.Index(text, "slow: "):]]) <= 1
		m.mu.Unlock()
		if first {
			return reply.WithLatency(45 * time.Second)
		}
		return reply
	}
	return llmtest.Echo(req)
}

// waitSlow waits for the first model call of the "slow: ..." message text
// and returns the caller's address.
func (m *fakeModel) waitSlow(t *testing.T, text string) string {
	t.Helper()
	timeout := time.After(3 * time.Minute)
	for {
		select {
		case s := <-m.slow:
			got, ip, _ := strings.Cut(s, "\x00")
			if got == text {
				return ip
			}
		case <-timeout:
			t.Fatalf("the model was not called for %q within 3 minutes", text)
		}
	}
}

func (m *fakeModel) callers(text string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls[text])
}
