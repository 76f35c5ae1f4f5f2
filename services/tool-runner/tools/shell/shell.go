// Package shell provides exec, nanobot's shell tool, running each command
// through a [sandbox.Executor]: in bubblewrap by default, confined to the
// call's workspace, with rlimits, a scrubbed environment, a timeout that
// kills the whole process tree, and output capped to its head and tail.
package shell

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// Config is the exec tool's config, the tools.exec section. The sandbox
// settings (sandbox, network, env, limits, ...) sit in the same section.
type Config struct {
	sandbox.Config
	// Timeout is the default timeout of a command, in seconds.
	Timeout int `json:"timeout"`
	// MaxTimeout is the largest timeout a call may ask for, in seconds.
	MaxTimeout int `json:"maxTimeout"`
	// MaxOutputChars is how much output a call returns (head and tail).
	MaxOutputChars int `json:"maxOutputChars"`
	// DenyPatterns are regular expressions of commands refused outright.
	// The sandbox is the protection; these only express policy.
	DenyPatterns []string `json:"denyPatterns"`
}

// DefaultConfig: 60 s by default, at most 600 s, 10,000 characters of
// output, the default sandbox.
func DefaultConfig() Config {
	return Config{Config: sandbox.DefaultConfig(), Timeout: 60, MaxTimeout: 600, MaxOutputChars: 10_000}
}

// Validate reports every invalid setting by its config key, joined.
func (c Config) Validate() error {
	var p config.Problems
	p.Join(c.Config.Validate())
	maxOK := c.MaxTimeout >= 1 && c.MaxTimeout <= 24*3600
	if !maxOK {
		p.Add("tools.exec.maxTimeout", "%d s is not between 1 and 86400", c.MaxTimeout)
	}
	// Measured against a maxTimeout that is itself valid.
	if c.Timeout < 1 || (maxOK && c.Timeout > c.MaxTimeout) {
		p.Add("tools.exec.timeout", "%d s is not between 1 and tools.exec.maxTimeout (%d)", c.Timeout, c.MaxTimeout)
	}
	if c.MaxOutputChars < 100 {
		p.Add("tools.exec.maxOutputChars", "%d is below 100", c.MaxOutputChars)
	}
	for _, pat := range c.DenyPatterns {
		if _, err := regexp.Compile(pat); err != nil {
			p.Add("tools.exec.denyPatterns", "%q: %w", pat, err)
		}
	}
	return p.Err()
}

type execTool struct {
	cfg  Config
	ex   *sandbox.Executor
	deny []*regexp.Regexp
	def  toolschema.Tool
}

// New returns the exec tool running commands with ex.
func New(cfg Config, ex *sandbox.Executor) (tools.Tool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &execTool{cfg: cfg, ex: ex}
	for _, p := range cfg.DenyPatterns {
		t.deny = append(t.deny, regexp.MustCompile(p))
	}
	net := "no network access"
	if cfg.Network {
		net = "network access"
	}
	confinement := "in a sandbox that sees only the workspace (read-write) and the system's programs (read-only), with " + net
	if cfg.Sandbox == sandbox.ModeNone {
		confinement = "without a sandbox (the operator turned it off)"
	}
	t.def = toolschema.Tool{
		Name: "exec",
		Description: fmt.Sprintf("Run a shell command (/bin/sh -c) in the workspace, %s. Returns stdout and stderr interleaved (long output keeps its start and end) and the exit code. Timeout %d s by default, at most %d s.",
			confinement, cfg.Timeout, cfg.MaxTimeout),
		Parameters: toolschema.Object(map[string]any{
			"command":     map[string]any{"type": "string", "minLength": 1, "description": "The shell command to run"},
			"working_dir": map[string]any{"type": "string", "description": "Working directory, relative to the workspace (default: the workspace)"},
			"timeout":     map[string]any{"type": "integer", "minimum": 1, "maximum": cfg.MaxTimeout, "default": cfg.Timeout, "description": fmt.Sprintf("Timeout in seconds (default %d, max %d); raise it for builds and installs", cfg.Timeout, cfg.MaxTimeout)},
		}, "command"),
		Exclusive: true,
	}
	return t, nil
}

func (t *execTool) Definition() toolschema.Tool { return t.def }

func (t *execTool) Run(ctx context.Context, c *tools.Call) (tools.Result, error) {
	var a struct {
		Command    string `json:"command"`
		WorkingDir string `json:"working_dir"`
		Timeout    int    `json:"timeout"`
	}
	if err := toolschema.Decode(c.Args, &a); err != nil {
		return tools.Result{}, err
	}
	for _, re := range t.deny {
		if re.MatchString(a.Command) {
			return tools.Result{}, fmt.Errorf("%w: the command matches tools.exec.denyPatterns (%s)", sandbox.ErrDenied, re)
		}
	}
	ws := c.Workspace
	dir := ws.Dir()
	if a.WorkingDir != "" {
		rel, err := ws.Directory(a.WorkingDir)
		if err != nil {
			return tools.Result{}, err
		}
		dir = ws.HostPath(rel)
	}
	timeout := config.SecondsDuration(a.Timeout)
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < timeout {
			timeout = max(left, time.Millisecond)
		}
	}
	binds := ws.ReadOnlyBinds()
	defer func() {
		for _, b := range binds {
			b.File.Close()
		}
	}()
	out, err := t.ex.Run(ctx, sandbox.Spec{
		Command:       a.Command,
		Workspace:     ws.Dir(),
		Dir:           dir,
		Timeout:       timeout,
		MaxOutput:     t.cfg.MaxOutputChars,
		ReadOnly:      binds,
		FileSizeLimit: c.FileSizeLimit,
	})
	if out == nil {
		return tools.Result{}, err
	}
	return tools.Result{Text: Format(out)}, err
}

// Format renders an outcome for the model: the output, then the exit code
// and what a signal means.
func Format(out *sandbox.Outcome) string {
	var b strings.Builder
	text := strings.TrimRight(out.Output, "\n")
	if text == "" {
		text = "(no output)"
	}
	b.WriteString(text)
	switch {
	case out.TimedOut:
		fmt.Fprintf(&b, "\n\n(killed after %s)", out.Duration.Round(100*time.Millisecond))
	default:
		fmt.Fprintf(&b, "\n\nExit code: %d", out.ExitCode)
		if note := out.SignalNote(); note != "" {
			b.WriteString(" (" + note + ")")
		}
	}
	if out.Truncated {
		fmt.Fprintf(&b, "\n(output was %d bytes; the middle was left out)", out.OutputBytes)
	}
	return b.String()
}

// KeyHints names nanobot's tools.exec keys nanofleet does not take.
func (Config) KeyHints() map[string]string {
	const binds = "the sandbox sees the workspace and the system's programs only; for an MCP server use tools.mcpServers.<name>.readOnlyPaths; remove the key"
	return map[string]string{
		"enable":         "nanofleet always offers exec, confined to its sandbox; remove the key",
		"pathAppend":     "commands get the sandbox's PATH; remove the key",
		"pathPrepend":    "commands get the sandbox's PATH; remove the key",
		"sandboxRoBinds": binds,
		"sandboxRwBinds": binds,
		"allowedEnvKeys": "use tools.exec.env",
		"allowPatterns":  "nanofleet has deny patterns only (tools.exec.denyPatterns); the sandbox is the protection; remove the key",
		// Where older nanobot configs put tools.restrictToWorkspace.
		"restrictToWorkspace": "exec always stays in the workspace, in its sandbox (the setting is tools.restrictToWorkspace); remove the key",
	}
}

// NanobotDefaults gives the tools.exec keys nanobot 0.3 writes by default.
func (Config) NanobotDefaults() map[string][]any {
	return map[string][]any{"enable": {true}}
}
