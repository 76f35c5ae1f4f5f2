package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/fleetdir"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/storeguard/storeguardtest"
	"github.com/nanofleet/nanofleet/pkg/syncbuf"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

func testEnv(t *testing.T, vars map[string]string) (*environment, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	home := t.TempDir()
	if vars == nil {
		vars = map[string]string{}
	}
	vars["NANOFLEET_HOME"] = home
	vars["HOME"] = home
	var out, errOut bytes.Buffer
	return newEnvironment(strings.NewReader(""), &out, &errOut, func(k string) string { return vars[k] }), &out, &errOut
}

// agentOneShot runs `agent -m Hello` in a fresh environment against a
// fake model answering answer, failing the test if the command fails,
// and returns the model, the environment and the command's output,
// trimmed.
func agentOneShot(t *testing.T, answer string) (*llmtest.Server, *environment, string) {
	t.Helper()
	llm := llmtest.NewServer(t)
	llm.Enqueue(llmtest.Text(answer))
	env, out, _ := testEnv(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "k"})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := dispatch(ctx, env, []string{"agent", "-m", "Hello"}); err != nil {
		t.Fatal(err)
	}
	return llm, env, strings.TrimSpace(out.String())
}

func TestAgentOneShot(t *testing.T) {
	llm, env, got := agentOneShot(t, "Hello from the fleet.")
	if got != "Hello from the fleet." {
		t.Fatalf("stdout = %q", got)
	}
	// The next one-shot in the same session sees the first turn's history.
	llm.Enqueue(llmtest.Text("second"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := dispatch(ctx, env, []string{"agent", "-m", "again"}); err != nil {
		t.Fatal(err)
	}
	last, _ := llm.LastRequest()
	var sawHello bool
	for _, m := range last.Messages {
		sawHello = sawHello || (m.Role == "user" && m.Content == "Hello")
	}
	if !sawHello {
		t.Error("second run did not see the first run's history")
	}
}

func TestChatReadsLines(t *testing.T) {
	llm := llmtest.NewServer(t)
	llm.Enqueue(llmtest.Text("one"), llmtest.Text("two"))
	env, out, _ := testEnv(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "k"})
	env.stdin = strings.NewReader("first\n\nsecond\n/exit\n")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := dispatch(ctx, env, []string{"chat"}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "one\n") || !strings.Contains(s, "two\n") {
		t.Fatalf("chat output = %q", s)
	}
}

// agentWithConfig writes data as env's default config file and runs
// `agent -m hi`, as a user starting with that file does.
func agentWithConfig(t *testing.T, env *environment, data string) error {
	t.Helper()
	if err := os.WriteFile(filepath.Join(env.home(), "config.json"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return dispatch(t.Context(), env, []string{"agent", "-m", "hi"})
}

// TestPastedNanobotConfigNamesEveryBadKey: a nanobot config.json pasted
// whole has bad keys in the shared sections and in the parts' sections;
// one start names all of them.
func TestPastedNanobotConfigNamesEveryBadKey(t *testing.T) {
	env, _, _ := testEnv(t, nil)
	pasted := `{
		"agents": {"defaults": {"model": "anthropic/claude-opus-4-5", "memoryWindow": 50}},
		"gateway": {"host": "192.168.1.5", "port": 18800},
		"tools": {"restrictToWorkspace": false, "exec": {"timeout": 60}},
		"channels": {"telegram": {"enabled": false, "tokn": "x"}}
	}`
	err := agentWithConfig(t, env, pasted)
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("err = %v, want an invalid config error", err)
	}
	for _, key := range []string{"agents.defaults.memoryWindow:", "gateway.host:", "gateway.port:", "tools.restrictToWorkspace:", "channels.telegram.tokn:"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s\n%v", strings.TrimSuffix(key, ":"), err)
		}
	}
}

// TestNanobotOnboardConfig: the config.json `nanobot onboard` writes
// (its whole schema at its defaults, as its save_config dumps it;
// testdata, made with nanobot's own schema.py of each version) fails only
// on tools.restrictToWorkspace, whose false nanofleet cannot give: the
// keys nanofleet does not take hold nanobot's defaults, which nobody set.
// 0.1.4's failed on nine keys, 0.3.0's on thirty-three.
func TestNanobotOnboardConfig(t *testing.T) {
	for _, name := range []string{"nanobot-0.1.4-onboard.json", "nanobot-0.3.0-onboard.json"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			env, _, _ := testEnv(t, nil)
			err = agentWithConfig(t, env, string(data))
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("err = %v, want an invalid config error", err)
			}
			if lines := strings.Split(err.Error(), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "tools.restrictToWorkspace: ") {
				t.Errorf("want tools.restrictToWorkspace alone named; got:\n%v", err)
			}
			// With that one key set as nanofleet can give it, and an
			// OpenRouter key (nanobot's setup: its default model,
			// anthropic/claude-opus-4-5, through OpenRouter), the fleet
			// answers through OpenRouter, as nanobot does.
			var file map[string]any
			if err := json.Unmarshal(data, &file); err != nil {
				t.Fatal(err)
			}
			llm := llmtest.NewServer(t)
			llm.Enqueue(llmtest.Text("hello from a nanobot config"))
			file["tools"].(map[string]any)["restrictToWorkspace"] = true
			file["providers"].(map[string]any)["openrouter"] = map[string]any{"apiKey": "sk-or", "apiBase": llm.URL()}
			edited, err := json.Marshal(file)
			if err != nil {
				t.Fatal(err)
			}
			env, out, _ := testEnv(t, nil)
			if err := agentWithConfig(t, env, string(edited)); err != nil {
				t.Fatalf("agent with restrictToWorkspace true: %v", err)
			}
			if got := strings.TrimSpace(out.String()); got != "hello from a nanobot config" {
				t.Errorf("stdout = %q", got)
			}
			if req, ok := llm.LastRequest(); !ok || req.Model != "anthropic/claude-opus-4-5" || req.Header.Get("Authorization") != "Bearer sk-or" {
				t.Errorf("request: model %q, authorization %q; want nanobot's default model with the OpenRouter key", req.Model, req.Header.Get("Authorization"))
			}
		})
	}
}

// TestOneShotReadsTheWorkspaceMemory: the first turn of a fleet that
// `agent -m` starts for itself has the workspace's memory/MEMORY.md (a
// nanobot workspace's) in its prompt; it ran before the file sync's first
// pass and went without.
func TestOneShotReadsTheWorkspaceMemory(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "memory", "MEMORY.md"), []byte("# Long-term memory\n- Ada prefers metric units.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	llm := llmtest.NewServer(t)
	llm.Enqueue(llmtest.Text("noted"))
	env, _, _ := testEnv(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "k"})
	if err := agentWithConfig(t, env, `{"agents": {"defaults": {"workspace": "`+ws+`"}}}`); err != nil {
		t.Fatal(err)
	}
	req, ok := llm.LastRequest()
	if !ok {
		t.Fatal("the model was not asked")
	}
	var prompt strings.Builder
	for _, m := range req.Messages {
		prompt.WriteString(m.Content)
	}
	if !strings.Contains(prompt.String(), "Ada prefers metric units.") {
		t.Errorf("the first turn's prompt lacks MEMORY.md:\n%s", prompt.String())
	}
}

// TestNanobotConfigPointedAt: without a config file of its own, a
// command tells a nanobot user how to use theirs, and runs with the
// defaults; with one, it says nothing of nanobot's.
func TestNanobotConfigPointedAt(t *testing.T) {
	llm := llmtest.NewServer(t)
	env, _, stderr := testEnv(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "k"})
	nanobot := filepath.Join(env.getenv("HOME"), ".nanobot", "config.json")
	if err := os.MkdirAll(filepath.Dir(nanobot), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nanobot, []byte(`{"agents": {"defaults": {"model": "gpt-4o"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	llm.Enqueue(llmtest.Text("hi"))
	if err := dispatch(t.Context(), env, []string{"agent", "-m", "hello"}); err != nil {
		t.Fatal(err)
	}
	if want := "cp " + nanobot + " " + filepath.Join(env.home(), "config.json"); !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}
	stderr.Reset()
	llm.Enqueue(llmtest.Text("hi"))
	if err := agentWithConfig(t, env, `{}`); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stderr.String(), ".nanobot") {
		t.Errorf("with a config of its own, stderr names nanobot's: %q", stderr.String())
	}
}

func TestBadConfigFailsNamingTheKey(t *testing.T) {
	env, _, _ := testEnv(t, nil)
	err := agentWithConfig(t, env, `{"agents":{"defaults":{"maxToolIterations":-1}}}`)
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "agents.defaults.maxToolIterations") {
		t.Fatalf("err = %v, want one naming agents.defaults.maxToolIterations", err)
	}
	err = agentWithConfig(t, env, `{"tools":{"exec":{"timeout":"soon"}}}`)
	if err == nil || !strings.Contains(err.Error(), "tools.exec.timeout") {
		t.Fatalf("err = %v, want one naming tools.exec.timeout", err)
	}
}

// TestEveryConfigProblemInOneRun: a file with problems in the shared
// sections, the model's settings and a part's section fails naming every
// one of them (a typo hid the bad values; each section's Validate named
// its first).
func TestEveryConfigProblemInOneRun(t *testing.T) {
	env, _, _ := testEnv(t, nil)
	data := `{
		"agents": {"defaults": {"modle": "x"}},
		"providers": {"openai": {"apiBase": "not a url"}, "opneai": {"apiKey": "k"}},
		"observability": {"listen": "::::"},
		"tools": {"exec": {"timeout": -5, "sandbox": "docker"}}
	}`
	err := agentWithConfig(t, env, data)
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("err = %v, want an invalid config error", err)
	}
	for _, key := range []string{"agents.defaults.modle", "observability.listen", "providers.opneai", "providers.openai.apiBase", "tools.exec.sandbox", "tools.exec.timeout"} {
		if !strings.Contains(err.Error(), "invalid config: "+key+": ") {
			t.Errorf("error does not name %s:\n%v", key, err)
		}
	}
}

// TestGivenConfigMustExist: a file given with --config that is not there
// fails naming it (it was ignored, and the command ran on the defaults);
// the default file stays optional.
func TestGivenConfigMustExist(t *testing.T) {
	for _, args := range [][]string{
		{"agent", "-m", "hi"},
		{"run"},
		{"status"},
	} {
		t.Run(args[0], func(t *testing.T) {
			env, _, _ := testEnv(t, nil)
			missing := filepath.Join(t.TempDir(), "nonexist.json")
			// Bounded: without the check, run runs until its context ends.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			err := dispatch(ctx, env, append([]string{args[0], "--config", missing}, args[1:]...))
			want := "config file " + missing + ": no such file or directory"
			if !errors.Is(err, os.ErrNotExist) || err.Error() != want {
				t.Fatalf("%s --config %s: %v, want %q", args[0], missing, err, want)
			}
		})
	}
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int { return bustest.FreePort(t) }

// startListening starts an all-in-one on file whose NATS takes clients
// on file's nats.port, with credentials; opts adds to the options. url
// is that NATS with the credentials.
func startListening(ctx context.Context, t *testing.T, file *config.File, opts fleet.Options) (_ *fleet.Fleet, url string) {
	t.Helper()
	opts.File, opts.Getenv = file, func(string) string { return "" }
	opts.DataDir, opts.Workspace, opts.Listen = t.TempDir(), t.TempDir(), true
	opts.Credentials = fleetdir.Credentials{User: "nanofleet", Password: "test-password"}
	f, err := fleet.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return f, fmt.Sprintf("nats://nanofleet:test-password@127.0.0.1:%d", file.NATS.Port)
}

func TestOnboardAndUnknownCommand(t *testing.T) {
	env, out, _ := testEnv(t, nil)
	if err := dispatch(t.Context(), env, []string{"onboard"}); err != nil {
		t.Fatal(err)
	}
	// The closing hint leads to the fleet, then to talking to it.
	for _, want := range []string{"config.json", "`nanofleet run`", "another terminal", "`nanofleet agent -m \"Hello\"`"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("onboard output lacks %q: %q", want, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(env.home(), "workspace", "SOUL.md")); err != nil {
		t.Error(err)
	}
	if err := dispatch(t.Context(), env, []string{"frobnicate"}); err == nil {
		t.Error("unknown command accepted")
	}
}

// TestOnboardRefusesABroadWorkspace: onboard writes the workspace and,
// under root, gives it to the sandbox user; a home directory is refused
// before anything is written or given away.
func TestOnboardRefusesABroadWorkspace(t *testing.T) {
	env, _, _ := testEnv(t, nil)
	home := t.TempDir()
	t.Setenv("HOME", home)
	err := dispatch(t.Context(), env, []string{"onboard", "--workspace", home})
	if err == nil || !strings.Contains(err.Error(), "holds the home directory") {
		t.Fatalf("onboard --workspace HOME: %v, want refused", err)
	}
	if _, err := os.Stat(filepath.Join(home, "SOUL.md")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SOUL.md written into the home directory: %v", err)
	}
}

// TestExitCodes: help asked for is a success, a command line that cannot
// be used exits 2 saying why (then the usage), anything else is a failure
// printed on stderr.
func TestExitCodes(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		want      int
		firstLine string // of stderr
	}{
		{"help", []string{"--help"}, 0, ""},
		{"command help", []string{"agent", "-h"}, 0, ""},
		{"no command", nil, 2, "usage: nanofleet <command> [arguments] [flags]"},
		{"unknown command", []string{"fly"}, 2, `nanofleet: unknown command "fly"`},
		{"nanobot's gateway", []string{"gateway"}, 2, `nanofleet: unknown command "gateway": nanobot's "gateway" is "nanofleet run" here (channels, agent and tools in one process)`},
		{"help for nanobot's gateway", []string{"help", "gateway"}, 2, `nanofleet: unknown command "gateway": nanobot's "gateway" is "nanofleet run" here (channels, agent and tools in one process)`},
		{"bad flag", []string{"agent", "--no-such-flag"}, 2, "nanofleet: agent: flag provided but not defined: -no-such-flag"},
		{"bench moved", []string{"bench"}, 1, "nanofleet: " + errBenchMoved.Error()},
		{"agent with an empty message", []string{"agent", "-m", " "}, 2, "nanofleet: agent: -m TEXT is empty"},
		{"agent with more arguments", []string{"agent", "-m", "hi", "extra", "args"}, 2, `nanofleet: agent: unexpected arguments "extra" "args"`},
		{"unknown log level", []string{"agent", "--log-level", "verbose", "-m", "hi"}, 2,
			`nanofleet: agent: invalid value "verbose" for flag -log-level: want debug, info, warn or error`},
		{"status with an argument", []string{"status", "now"}, 2, `nanofleet: status: unexpected arguments "now"`},
		// Commands that join the fleet refuse bad arguments before they
		// look for one.
		{"pairing without a code", []string{"pairing", "approve"}, 2, "nanofleet: pairing approve: want CODE"},
		{"profile without seed", []string{"profile", "sow"}, 2, `nanofleet: profile: unknown command "sow"`},
		{"cron remove with two ids", []string{"cron", "remove", "a", "b"}, 2, `nanofleet: cron remove: unexpected arguments "b" after "a"`},
		{"channels login elsewhere", []string{"channels", "login", "telegram"}, 2, `nanofleet: channels login: only whatsapp links by QR code, not "telegram"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			env := newEnvironment(strings.NewReader(""), &out, &errOut, func(string) string { return "" })
			var stderr bytes.Buffer
			got := exitCode(dispatch(t.Context(), env, c.args), &stderr)
			first, _, _ := strings.Cut(stderr.String(), "\n")
			if got != c.want || first != c.firstLine {
				t.Errorf("exit %d, stderr %q; want %d, first line %q", got, stderr.String(), c.want, c.firstLine)
			}
			if c.want == 2 && !strings.Contains(stderr.String(), "usage: nanofleet") {
				t.Errorf("stderr %q has no usage", stderr.String())
			}
		})
	}
}

// TestModelPrecedence: the model the fleet names in its requests and in
// /status is the --model flag's, else NANOFLEET_MODEL's, else the config's.
func TestModelPrecedence(t *testing.T) {
	tests := []struct {
		name, envModel, flag, want string
	}{
		{"config", "", "", "from-config"},
		{"env over config", "from-env", "", "from-env"},
		{"flag over env", "from-env", "from-flag", "from-flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := llmtest.NewServer(t)
			llm.Enqueue(llmtest.Text("hello"))
			env, out, _ := testEnv(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "k", "NANOFLEET_MODEL": tt.envModel})
			cfg := filepath.Join(env.home(), "config.json")
			if err := os.WriteFile(cfg, []byte(`{"agents":{"defaults":{"model":"from-config"}},"tools":{"exec":{"sandbox":"none"}}}`), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"agent"}
			if tt.flag != "" {
				args = append(args, "--model", tt.flag)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if err := dispatch(ctx, env, append(args, "-m", "hi")); err != nil {
				t.Fatal(err)
			}
			req, ok := llm.LastRequest()
			if !ok || req.Model != tt.want {
				t.Fatalf("the model was asked for %q, want %q", req.Model, tt.want)
			}
			out.Reset()
			if err := dispatch(ctx, env, append(args, "-m", "/status")); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "Model: "+tt.want+"\n") {
				t.Errorf("/status = %q, want Model: %s", out.String(), tt.want)
			}
		})
	}
}

// TestHomeLetsTheSandboxThrough: a ~/.nanofleet created 0700 (as a root
// shell's umask or an old version made it) that holds the workspace is
// made searchable, so that the sandbox's user reaches the workspace; one
// that does not hold it is left alone.
func TestHomeLetsTheSandboxThrough(t *testing.T) {
	tests := []struct {
		name      string
		workspace string // relative to the test's root; "" for the default inside home
		want      os.FileMode
	}{
		{"workspace inside", "", 0o711},
		{"workspace elsewhere", "elsewhere/ws", 0o700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			home := filepath.Join(root, ".nanofleet")
			if err := os.Mkdir(home, 0o700); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			vars := map[string]string{"NANOFLEET_HOME": home, "HOME": root}
			env := newEnvironment(strings.NewReader(""), &bytes.Buffer{}, &stderr, func(k string) string { return vars[k] })
			c := common{configPath: filepath.Join(home, "config.json"), dataDir: filepath.Join(home, "data"), workspace: filepath.Join(home, "workspace")}
			if tt.workspace != "" {
				c.workspace = filepath.Join(root, tt.workspace)
			}
			if _, err := env.load(&c); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(home)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != tt.want {
				t.Fatalf("%s is %#o, want %#o; stderr: %s", home, st.Mode().Perm(), tt.want, stderr.String())
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://nanofleet:s3cret@127.0.0.1:4222", "nats://nanofleet:xxxxx@127.0.0.1:4222"},
		{"nats://a:p1@n1:4222,nats://a:p2@n2:4222", "nats://a:xxxxx@n1:4222,nats://a:xxxxx@n2:4222"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestStatusShowsTokenUsage: `nanofleet status` sums the usage the turns
// recorded, in total and per model, user and session (issue 16.7). The
// turns go through `agent -m` joining a running all-in-one.
func TestStatusShowsTokenUsage(t *testing.T) {
	llm := llmtest.NewServer(t)
	llm.Enqueue(llmtest.Text("one").WithUsage(100, 10).WithTokenDetails(40, 2), llmtest.Text("two").WithUsage(200, 20))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	file := config.Defaults()
	data := fmt.Sprintf(`{"nats": {"port": %d}, "agents": {"defaults": {"model": "usage-model"}}, "providers": {"custom": {"apiKey": "k", "apiBase": %q}}}`, freePort(t), llm.URL())
	if err := config.Parse(file, []byte(data), func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	f, url := startListening(ctx, t, file, fleet.Options{})
	defer f.Stop()
	env, out, _ := testEnv(t, nil)
	for _, m := range []string{"first", "second"} {
		if err := dispatch(ctx, env, []string{"agent", "--nats", url, "-m", m}); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if err := dispatch(ctx, env, []string{"status", "--nats", url}); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if f := strings.Fields(line); len(f) == 8 {
			rows[f[0]+" "+f[1]] = f[2:]
		} else if len(f) == 7 && f[0] == "total" {
			rows["total"] = f[1:]
		}
	}
	// turns, model calls, prompt, cached, completion, reasoning
	const want = "2 2 300 40 30 2"
	for _, key := range []string{"total", "model usage-model"} {
		if got := strings.Join(rows[key], " "); got != want {
			t.Errorf("%s: %q, want %q\n%s", key, got, want, out.String())
		}
	}
	var users, sessions int
	for k, v := range rows {
		if strings.Join(v, " ") != want {
			continue
		}
		switch {
		case k == "user cli": // the terminal's one sender, "cli", named once
			users++
		case strings.HasPrefix(k, "session cli:"):
			sessions++
		}
	}
	if users != 1 || sessions != 1 {
		t.Errorf("want one cli user and one cli session with all the tokens\n%s", out.String())
	}
}

// TestModelFlagWhenJoining: --model cannot change a running fleet's
// model; agent says so instead of silently using the fleet's.
func TestModelFlagWhenJoining(t *testing.T) {
	env, _, _ := testEnv(t, nil)
	lock, err := fleetdir.Acquire(filepath.Join(env.home(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if _, err := lock.Credentials(); err != nil {
		t.Fatal(err)
	}
	if err := lock.Publish(fleetdir.Info{PID: 1, Command: "run", NATSURL: "nats://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	err = dispatch(t.Context(), env, []string{"agent", "--model", "other", "-m", "hi"})
	if err == nil || !strings.Contains(err.Error(), "--model sets the model of a fleet this command starts") {
		t.Fatalf("agent --model joining a running fleet: %v", err)
	}
}

// TestRunWithTheMetricsPortTaken: `run` binds its metrics port before the
// fleet starts, so a taken one stops it at once, before it announces any
// address or starts a part (which then failed on the stop and said so).
func TestRunWithTheMetricsPortTaken(t *testing.T) {
	taken := bustest.TakenPort(t)
	env, _, errOut := testEnv(t, map[string]string{"OPENAI_API_KEY": "k"})
	args := []string{"run", "--http", taken.Addr().String(), "--listen", "127.0.0.1:0", "--log-level", "warn"}
	err := dispatch(t.Context(), env, args)
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "observability.listen or --http") {
		t.Fatalf("run: %v, want address in use naming observability.listen or --http", err)
	}
	if out := errOut.String(); out != "" {
		t.Errorf("run printed before failing:\n%s", out)
	}
}

// TestChatDropsAnOverlongLine: a message over chat's limit is refused with
// an error and the chat goes on with the next line (it used to end the
// chat with "bufio.Scanner: token too long" and lose what followed).
func TestChatDropsAnOverlongLine(t *testing.T) {
	llm := llmtest.NewServer(t)
	llm.Enqueue(llmtest.Text("one"))
	env, out, errOut := testEnv(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "k"})
	env.stdin = strings.NewReader(strings.Repeat("a", maxChatLine+1) + "\nsecond\n")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := dispatch(ctx, env, []string{"chat"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "that one was not sent") {
		t.Errorf("stderr = %q, want the refusal", errOut.String())
	}
	if !strings.Contains(out.String(), "one\n") {
		t.Fatalf("the next line was not answered: %q", out.String())
	}
	if req, ok := llm.LastRequest(); !ok || req.Messages[len(req.Messages)-1].Content != "second" {
		t.Errorf("model asked %v, want the line after the long one", req.Messages)
	}
}

func TestReadLine(t *testing.T) {
	tests := []struct {
		name, in string
		limit    int
		want     []string // "!" for errLineTooLong
	}{
		{"lines", "a\nb\n", 10, []string{"a", "b"}},
		{"crlf and no last end", "a\r\nb", 10, []string{"a", "b"}},
		{"at the limit", "abcd\n", 4, []string{"abcd"}},
		{"over the limit, then more", "abcde\nok\n", 4, []string{"!", "ok"}},
		{"over the limit at the end", "ok\nabcdefghijklmnopqrstuvwxyz0123456789", 4, []string{"ok", "!"}},
		{"longer than the buffer", strings.Repeat("x", 100) + "\ny\n", 200, []string{strings.Repeat("x", 100), "y"}},
		{"far over, buffer by buffer", strings.Repeat("x", 100) + "\ny\n", 20, []string{"!", "y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReaderSize(strings.NewReader(tt.in), 16)
			var got []string
			for {
				line, err := readLine(r, tt.limit)
				if errors.Is(err, io.EOF) {
					break
				}
				if errors.Is(err, errLineTooLong) {
					line = "!"
				} else if err != nil {
					t.Fatal(err)
				}
				got = append(got, line)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("lines %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAgentInterrupted: `agent -m` stopped by Ctrl-C while it waits for
// the answer (running a fleet of its own) exits at once with the shell's
// code for it, 130, saying so, not after the turn with "context canceled"
// and 1; the next `agent -m` finishes the interrupted turn first.
func TestAgentInterrupted(t *testing.T) {
	llm := llmtest.NewServer(t)
	atModel, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	var once sync.Once
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		first := false
		once.Do(func() { first = true; close(atModel) })
		if first {
			<-release // held until the test ends
		}
		return llmtest.Text("answer to " + r.LastUserText())
	})
	env, out, _ := testEnv(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "k"})
	// The interrupted turn is taken again at the next start, not once its
	// ack wait is over (it was: 30 s by default; 10 minutes here, against
	// the minute the next agent has).
	if err := os.WriteFile(filepath.Join(env.home(), "config.json"), []byte(`{"worker":{"ackWaitSeconds":600}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, interrupt := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- dispatch(ctx, env, []string{"agent", "-m", "Hello"}) }()
	select {
	case <-atModel:
	case <-time.After(time.Minute):
		t.Fatal("the turn never reached the model")
	}
	interrupt()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("agent did not return after the interrupt")
	}
	var stderr bytes.Buffer
	if code := exitCode(err, &stderr); code != 130 || strings.TrimSpace(stderr.String()) != "nanofleet: interrupted" {
		t.Errorf("exit %d, stderr %q; want 130, %q", code, stderr.String(), "nanofleet: interrupted")
	}
	out.Reset()
	next, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := dispatch(next, env, []string{"agent", "-m", "/history 5"}); err != nil {
		t.Fatalf("the next agent, behind the interrupted turn: %v", err)
	}
	if !strings.Contains(out.String(), "assistant: answer to Hello") {
		t.Errorf("history after the interrupted turn:\n%s", out.String())
	}
}

// TestChatSaysWhenTheFleetGoes: a chat joined to a running fleet says so
// when the fleet goes away (a message then waited in the connection for
// its 15-minute turn, which looked like a hang), refuses what is typed
// meanwhile (never sent later behind the user's back) and goes on once the
// fleet is back.
func TestChatSaysWhenTheFleetGoes(t *testing.T) {
	llm := llmtest.NewServer(t)
	var mu sync.Mutex
	var asked []string
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, r.LastUserText())
		return llmtest.Text("echo: " + r.LastUserText())
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	port := freePort(t)
	file := config.Defaults()
	data := fmt.Sprintf(`{"nats": {"port": %d}, "agents": {"defaults": {"model": "echo-model"}}, "providers": {"custom": {"apiKey": "k", "apiBase": %q}}}`, port, llm.URL())
	if err := config.Parse(file, []byte(data), func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	dataDir, ws := t.TempDir(), t.TempDir()
	start := func() *fleet.Fleet {
		f, err := fleet.Start(ctx, fleet.Options{File: file, Getenv: func(string) string { return "" }, DataDir: dataDir, Workspace: ws,
			Listen: true, Credentials: fleetdir.Credentials{User: "nanofleet", Password: "test-password"}})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := start()
	stdin, typed := io.Pipe()
	var out, errOut syncbuf.Buffer
	env := newEnvironment(stdin, &out, &errOut, func(k string) string { return map[string]string{"HOME": t.TempDir()}[k] })
	url := fmt.Sprintf("nats://nanofleet:test-password@127.0.0.1:%d", port)
	chat := make(chan error, 1)
	go func() { chat <- dispatch(ctx, env, []string{"chat", "--nats", url}) }()
	shows := func(b *syncbuf.Buffer, s string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := b.Await(ctx, s); err != nil {
			t.Fatalf("no %q in %q: %v", s, b.String(), err)
		}
	}
	fmt.Fprintln(typed, "first")
	shows(&out, "echo: first")
	f.Stop()
	shows(&errOut, "lost the fleet")
	fmt.Fprintln(typed, "second")
	shows(&errOut, "the fleet is not reachable; the message was not sent")
	f = start()
	defer f.Stop()
	shows(&errOut, "the fleet is back")
	fmt.Fprintln(typed, "third")
	shows(&out, "echo: third")
	// In order per session: had it gone out on the way back, the model
	// would have seen it before "third".
	mu.Lock()
	if slices.Contains(asked, "second") {
		t.Errorf("the refused message went out later: the model was asked %q", asked)
	}
	mu.Unlock()
	typed.Close()
	select {
	case err := <-chat:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("chat did not end with its input")
	}
}

// TestChatInterruptedAtThePrompt: Ctrl-C while chat waits for a line ends
// it, with the fleet it runs for itself; it waited for the input to end
// (a terminal's never does: 31 s with a pipe held open for 30).
func TestChatInterruptedAtThePrompt(t *testing.T) {
	llm := llmtest.NewServer(t)
	env, _, _ := testEnv(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "k"})
	stdin, typed := io.Pipe()
	defer typed.Close()
	var out syncbuf.Buffer
	env.stdin, env.stdout = stdin, &out
	ctx, interrupt := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- dispatch(ctx, env, []string{"chat"}) }()
	bustest.Eventually(t, time.Minute, func() error {
		if !strings.Contains(out.String(), "› ") {
			return fmt.Errorf("no prompt in %q", out.String())
		}
		return nil
	})
	interrupt()
	if err := bustest.Receive(t, done, time.Minute); err != nil {
		t.Errorf("chat interrupted at the prompt: %v", err)
	}
}

// TestConversationSaysWhenTheStoreFills: a chat with a fleet of its own
// whose store fills while a turn runs says so, and that the turn goes on
// once space is freed, instead of waiting without a word (the API answers
// 507 then; the CLI was silent), then prints the answer. A message typed
// while the store is short of its reserve is refused at once, saying why;
// `agent -m` on such a store fails to start its fleet naming the disk.
func TestConversationSaysWhenTheStoreFills(t *testing.T) {
	// 128 MiB: the default reserve is 32 MiB and the store recovers at
	// twice that free.
	dataDir := storeguardtest.SmallFS(t, "128m")
	held := llmtest.Hold("in flight", llmtest.Text("late answer"), llmtest.Echo)
	llm := llmtest.NewServer(t)
	llm.Handle(held.Script)
	env, _, _ := testEnv(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "k"})
	stdin, typed := io.Pipe()
	stdout, errOut := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	env.stdin, env.stdout, env.stderr = stdin, stdout, errOut
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- dispatch(ctx, env, []string{"chat", "--data", dataDir}) }()
	fmt.Fprintln(typed, "in flight")
	bustest.Receive(t, held.Asked, time.Minute) // the turn reached the model
	ballast := filepath.Join(dataDir, "ballast")
	storeguardtest.Fill(t, ballast)
	shows(t, errOut, "storage full")
	shows(t, errOut, "the turn goes on then")
	held.Release()
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	shows(t, errOut, "the store has room again")
	shows(t, stdout, "late answer")

	storeguardtest.FillTo(t, ballast, 16<<20)
	// The guard looks once a second and logs what it sees.
	const seen = "new messages are refused until space is freed"
	bustest.Eventually(t, 30*time.Second, func() error {
		if n := strings.Count(errOut.String(), seen); n != 2 {
			return fmt.Errorf("%d of %q in %q, want 2", n, seen, errOut.String())
		}
		return nil
	})
	fmt.Fprintln(typed, "while full")
	shows(t, errOut, "error: the message was not sent: storage full")
	for _, r := range llm.Requests() {
		if r.LastUserText() == "while full" {
			t.Error("the model was asked a message typed on a full store")
		}
	}
	typed.Close()
	if err := bustest.Receive(t, done, time.Minute); err != nil {
		t.Fatalf("chat: %v", err)
	}

	// A fleet of its own cannot start on it: the server refuses to make
	// its streams, and the error names the disk.
	err := dispatch(ctx, env, []string{"agent", "--data", dataDir, "-m", "hello"})
	if err == nil || !strings.Contains(err.Error(), "storage full") || !strings.Contains(err.Error(), "the store is in "+dataDir) {
		t.Errorf("agent -m on a full store: %v, want it refused saying the store is full", err)
	}
}
