package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	"github.com/moby/buildkit/frontend/dockerui"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	digest "github.com/opencontainers/go-digest"
	"golang.org/x/mod/modfile"
)

const dockerfilePath = "deploy/docker/Dockerfile"

// imageTargets are the Dockerfile's final stages: the four services and the
// all-in-one binary.
var imageTargets = append(slices.Clone(services), "nanofleet")

// sandboxed images run bubblewrap; the others are distroless.
var sandboxed = []string{"tool-runner", "nanofleet"}

type dockerfile struct {
	stages  []instructions.Stage
	metaArg map[string]string // ARG defaults before the first FROM
}

func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	res, err := parser.Parse(bytes.NewReader(readFile(t, dockerfilePath)))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("parser warning: %s", w.Short)
	}
	var warnings []string
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		warnings = append(warnings, fmt.Sprintf("%s: %s (line %d)", rule, msg, loc[0].Start.Line))
	}})
	stages, metaArgs, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("instructions: %v", err)
	}
	for _, w := range warnings {
		t.Errorf("lint: %s", w)
	}
	df := dockerfile{stages: stages, metaArg: map[string]string{}}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Value != nil {
				df.metaArg[kv.Key] = *kv.Value
			}
		}
	}
	return df
}

func dockerfileStages(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, s := range parseDockerfile(t).stages {
		names = append(names, s.Name)
	}
	return names
}

func (df dockerfile) stage(name string) (instructions.Stage, bool) {
	for _, s := range df.stages {
		if s.Name == name {
			return s, true
		}
	}
	return instructions.Stage{}, false
}

// chain returns the stage and the stages it is built FROM, nearest first,
// and the external base image it ends in (meta ARGs expanded).
func (df dockerfile) chain(t *testing.T, name string) ([]instructions.Stage, string) {
	t.Helper()
	var chain []instructions.Stage
	for {
		s, ok := df.stage(name)
		if !ok {
			lex := shell.NewLex('\\')
			base, _, err := lex.ProcessWord(name, shell.EnvsFromSlice(envList(df.metaArg)))
			if err != nil {
				t.Fatalf("expand %s: %v", name, err)
			}
			return chain, base
		}
		chain = append(chain, s)
		name = s.BaseName
	}
}

func envList(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// commands returns the commands of type T in a chain, nearest stage first
// and, within a stage, last command first: the first one found is the one
// in effect.
func commands[T instructions.Command](chain []instructions.Stage) []T {
	var out []T
	for _, s := range chain {
		for i := len(s.Commands) - 1; i >= 0; i-- {
			if c, ok := s.Commands[i].(T); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

func TestDockerfileTargets(t *testing.T) {
	df := parseDockerfile(t)
	if last := df.stages[len(df.stages)-1].Name; last != "nanofleet" {
		t.Errorf("the default (last) target is %s, want nanofleet", last)
	}
	for _, name := range imageTargets {
		t.Run(name, func(t *testing.T) {
			chain, base := df.chain(t, name)
			if len(chain) == 0 {
				t.Fatalf("no stage %s", name)
			}

			// Non-root, set in the final stage itself so it cannot be lost
			// by rebasing the stage.
			users := commands[*instructions.UserCommand](chain[:1])
			if len(users) == 0 {
				t.Fatal("the final stage sets no USER")
			}
			if u, _, _ := strings.Cut(users[0].User, ":"); u == "" || u == "0" || u == "root" {
				t.Errorf("USER %s, want a non-root user", users[0].User)
			}

			eps := commands[*instructions.EntrypointCommand](chain)
			if want := "/usr/local/bin/" + name; len(eps) == 0 || eps[0].PrependShell || !slices.Equal(eps[0].CmdLine, []string{want}) {
				t.Errorf("ENTRYPOINT %v, want exec form [%q]", eps, want)
			}
			if name == "nanofleet" {
				cmds := commands[*instructions.CmdCommand](chain)
				if len(cmds) == 0 || cmds[0].PrependShell || len(cmds[0].CmdLine) == 0 || cmds[0].CmdLine[0] != "run" {
					t.Errorf("CMD %v, want the exec form of `nanofleet run ...`", cmds)
				}
			}
			copied := map[string]string{} // destination -> source stage
			for _, c := range commands[*instructions.CopyCommand](chain) {
				for _, src := range c.SourcePaths {
					copied[c.DestPath] = c.From + ":" + src
				}
			}
			if got, want := copied["/usr/local/bin/"+name], "build-"+name+":/out/"+name; got != want {
				t.Errorf("/usr/local/bin/%s comes from %q, want %q", name, got, want)
			}
			if got := copied["/usr/local/bin/healthcheck"]; got != "build-healthcheck:/out/healthcheck" {
				t.Errorf("/usr/local/bin/healthcheck comes from %q; the compose healthchecks need it", got)
			}

			labels := map[string]string{}
			for _, l := range commands[*instructions.LabelCommand](chain) {
				for _, kv := range l.Labels {
					if _, ok := labels[kv.Key]; !ok {
						labels[kv.Key] = kv.Value
					}
				}
			}
			for _, k := range []string{"title", "description", "source", "version", "revision", "created", "vendor"} {
				if labels["org.opencontainers.image."+k] == "" {
					t.Errorf("no org.opencontainers.image.%s label", k)
				}
			}

			runs := strings.Join(func() []string {
				var out []string
				for _, r := range commands[*instructions.RunCommand](chain) {
					out = append(out, strings.Join(r.CmdLine, " "))
				}
				return out
			}(), "\n")
			if slices.Contains(sandboxed, name) {
				if !strings.Contains(runs, "bubblewrap") || !strings.HasPrefix(base, "debian:") {
					t.Errorf("base %s, runs %q: want Debian with bubblewrap installed", base, runs)
				}
			} else if !strings.HasPrefix(base, "gcr.io/distroless/static") || !strings.HasSuffix(base, ":nonroot") {
				t.Errorf("base image %s, want gcr.io/distroless/static*:nonroot", base)
			}

			build, _ := df.chain(t, "build-"+name)
			if len(build) == 0 {
				t.Fatalf("no stage build-%s", name)
			}
			workdirs := commands[*instructions.WorkdirCommand](build)
			if len(workdirs) == 0 || workdirs[0].Path != "/src/services/"+name {
				t.Errorf("build-%s works in %v, want /src/services/%s", name, workdirs, name)
			}
			buildRuns := commands[*instructions.RunCommand](build)
			if len(buildRuns) == 0 || !strings.Contains(strings.Join(buildRuns[0].CmdLine, " "), "go build") ||
				!strings.Contains(strings.Join(buildRuns[0].CmdLine, " "), "-o /out/"+name+" .") {
				t.Errorf("build-%s does not `go build -o /out/%s .`", name, name)
			}
			envs := map[string]string{}
			for _, e := range commands[*instructions.EnvCommand](build) {
				for _, kv := range e.Env {
					envs[kv.Key] = kv.Value
				}
			}
			if envs["CGO_ENABLED"] != "0" {
				t.Errorf("build-%s: CGO_ENABLED=%q, want 0 (static binary)", name, envs["CGO_ENABLED"])
			}
		})
	}
}

// TestDockerfileLint runs BuildKit's own checks (`docker build --check`)
// over every stage, with base images resolved by a stub: no registry is
// reached.
func TestDockerfileLint(t *testing.T) {
	dt := readFile(t, dockerfilePath)
	src := llb.Local("dockerfile")
	def, err := src.Marshal(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range append([]string{""}, imageTargets...) {
		t.Run("target="+target, func(t *testing.T) {
			sm := llb.NewSourceMap(&src, "Dockerfile", "Dockerfile", dt)
			sm.Definition = def
			res, err := dockerfile2llb.DockerfileLint(t.Context(), dt, dockerfile2llb.ConvertOpt{
				Config:       dockerui.Config{Target: target},
				SourceMap:    sm,
				MetaResolver: stubResolver{},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Error != nil {
				t.Errorf("build error: %s", res.Error.Message)
			}
			for _, w := range res.Warnings {
				line := 0
				if w.Location != nil && len(w.Location.Ranges) > 0 {
					line = int(w.Location.Ranges[0].Start.Line)
				}
				t.Errorf("%s (line %d): %s", w.RuleName, line, w.Detail)
			}
		})
	}
}

// stubResolver answers every base image with an empty linux/amd64 config.
type stubResolver struct{}

func (stubResolver) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	cfg := []byte(`{"architecture":"amd64","os":"linux","config":{}}`)
	return ref, digest.FromBytes(cfg), cfg, nil
}

// TestDockerBuildContext: what the Dockerfile copies is in the build
// context and not ignored, the workspace it builds in names only modules it
// copies, and secrets stay out of the context.
func TestDockerBuildContext(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	ignored := func(p string) bool {
		m, err := pm.MatchesOrParentMatches(p)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	df := parseDockerfile(t)
	var sources []string
	dropped := map[string]bool{}
	for _, s := range df.stages {
		for _, c := range s.Commands {
			switch c := c.(type) {
			case *instructions.CopyCommand:
				if c.From == "" {
					sources = append(sources, c.SourcePaths...)
				}
			case *instructions.RunCommand:
				line := strings.Join(c.CmdLine, " ")
				if _, after, ok := strings.Cut(line, "go work edit -dropuse="); ok {
					dropped[filepath.Clean(strings.Fields(after)[0])] = true
				}
			}
		}
	}
	for _, src := range sources {
		src = strings.TrimSuffix(src, "/")
		if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
			t.Errorf("COPY %s: %v", src, err)
		}
		if ignored(src) {
			t.Errorf("COPY %s: excluded by .dockerignore", src)
		}
	}

	for _, secret := range []string{".env", "deploy/.env", "services/agent-worker/.env.local", "user.creds", ".git/config"} {
		if !ignored(secret) {
			t.Errorf("%s would be sent to the builder", secret)
		}
	}
	for _, needed := range []string{"go.work", "pkg/bus/connect.go", "services/agent-worker/go.mod", "deploy/cmd/healthcheck/main.go"} {
		if ignored(needed) {
			t.Errorf("%s is excluded from the build context", needed)
		}
	}

	work, err := modfile.ParseWork("go.work", readFile(t, "go.work"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range work.Use {
		dir := filepath.Clean(u.Path)
		if dropped[dir] {
			continue
		}
		if !slices.ContainsFunc(sources, func(src string) bool {
			src = filepath.Clean(strings.TrimSuffix(src, "/"))
			return dir == src || strings.HasPrefix(dir, src+string(filepath.Separator))
		}) {
			t.Errorf("go.work uses %s, which the Dockerfile neither copies nor drops: the image build would fail", u.Path)
		}
	}
	for _, name := range imageTargets {
		if _, err := os.Stat(filepath.Join(repoRoot, "services", name, "go.mod")); err != nil {
			t.Errorf("image %s builds services/%s: %v", name, name, err)
		}
	}
}
