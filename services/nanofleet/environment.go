package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/fleetdir"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
	"github.com/nats-io/nats.go/jetstream"
)

// environment is what a command may touch: streams, the environment and
// the home directory. Tests build their own.
type environment struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// stopNow is closed when the user asks a second time to stop (a
	// second Ctrl-C); nil never closes.
	stopNow <-chan struct{}
}

// newEnvironment prints to stdout and stderr through a [plainWriter]:
// what commands print holds models' text.
func newEnvironment(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *environment {
	return &environment{stdin: stdin, stdout: &plainWriter{w: stdout}, stderr: &plainWriter{w: stderr}, getenv: getenv}
}

// home is ~/.nanofleet, or NANOFLEET_HOME.
func (e *environment) home() string {
	if h := e.getenv("NANOFLEET_HOME"); h != "" {
		return h
	}
	dir, err := os.UserHomeDir()
	if err != nil {
		dir = "."
	}
	return filepath.Join(dir, ".nanofleet")
}

// common are the flags of every command that touches the fleet.
type common struct {
	configPath string
	// configGiven says --config was on the command line: that file must
	// exist, while the default one may not yet.
	configGiven bool
	dataDir     string
	workspace   string
	nats        string
	model       string
	logLevel    slog.Level
}

// register adds the flags of a command that runs the fleet, or a fleet
// of its own when none runs (run, agent, chat).
func (e *environment) register(fs *flag.FlagSet, c *common) {
	e.registerPaths(fs, c)
	fs.StringVar(&c.workspace, "workspace", "", "workspace `directory` (default from config: ~/.nanofleet/workspace)")
	fs.StringVar(&c.nats, "nats", "", "join an external NATS at this `URL` instead of embedding one")
	fs.StringVar(&c.model, "model", "", "model of the fleet this command starts (over NANOFLEET_MODEL, over agents.defaults.model)")
	c.logLevel = slog.LevelWarn
	fs.Var(logLevel{&c.logLevel}, "log-level", "log `level`: debug, info, warn or error")
}

// registerClient adds the flags of a command that only joins the running
// fleet: where to find it.
func (e *environment) registerClient(fs *flag.FlagSet, c *common) {
	e.registerPaths(fs, c)
	fs.StringVar(&c.nats, "nats", "", "the fleet's NATS `URL` (default: nats.url of the config, else the fleet running on the data directory)")
}

func (e *environment) registerPaths(fs *flag.FlagSet, c *common) {
	c.configPath = filepath.Join(e.home(), "config.json")
	fs.Var(configFlag{c}, "config", "config `file`")
	fs.StringVar(&c.dataDir, "data", filepath.Join(e.home(), "data"), "data `directory` of the embedded NATS server")
}

// configFlag is --config: the path, and that it was given.
type configFlag struct{ c *common }

func (f configFlag) String() string {
	if f.c == nil {
		return ""
	}
	return f.c.configPath
}

func (f configFlag) Set(path string) error {
	f.c.configPath, f.c.configGiven = path, true
	return nil
}

// load reads the config and applies the flags. The default file is
// optional (a fresh machine has none); one given with --config is not.
func (e *environment) load(c *common) (*config.File, error) {
	e.pointAtNanobotConfig(c)
	file, err := config.Load(c.configPath, e.getenv, !c.configGiven)
	if err != nil {
		if file != nil {
			// The shared sections' bad keys and the parts' in one
			// report: a file pasted from nanobot has both, and one
			// start per section is a slow way to learn them.
			ws, _ := config.ExpandHome(cmp.Or(c.workspace, file.Agents.Defaults.Workspace))
			err = errors.Join(err, fleet.CheckSections(file, e.getenv, ws, true))
		}
		return nil, err
	}
	if c.nats != "" {
		file.NATS.URL = c.nats
	}
	// Flag over environment over file: Load applied NANOFLEET_MODEL.
	if c.model != "" {
		file.Agents.Defaults.Model = c.model
	}
	if c.workspace == "" {
		c.workspace = file.Agents.Defaults.Workspace
	}
	if c.workspace, err = config.ExpandHome(c.workspace); err != nil {
		return nil, err
	}
	if c.dataDir, err = config.ExpandHome(c.dataDir); err != nil {
		return nil, err
	}
	if err := e.letSandboxThrough(c.workspace); err != nil {
		return nil, err
	}
	return file, nil
}

// pointAtNanobotConfig tells a nanobot user starting without a config
// file that theirs can be used: nanofleet does not read nanobot's file on
// its own (the two may be meant to differ), and started with the defaults
// without a word.
func (e *environment) pointAtNanobotConfig(c *common) {
	if c.configGiven {
		return
	}
	if _, err := os.Stat(c.configPath); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	home := e.getenv("HOME")
	if home == "" {
		return
	}
	nanobot := filepath.Join(home, ".nanobot", "config.json")
	if _, err := os.Stat(nanobot); err != nil {
		return
	}
	fmt.Fprintf(e.stderr, "nanofleet: no %s, so the defaults apply; to use nanobot's config (its keys are read as nanobot reads them): cp %s %s\n",
		c.configPath, nanobot, c.configPath)
}

// letSandboxThrough makes nanofleet's home (~/.nanofleet) searchable by
// others when the workspace is inside it: exec and MCP servers run as
// another user (the sandbox's, or tools.exec.hostUid under root), which
// must reach the workspace. Searchable only: the home stays unlistable,
// the data directory and the config stay private.
func (e *environment) letSandboxThrough(workspace string) error {
	home := e.home()
	rel, err := filepath.Rel(home, workspace)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil
	}
	fi, err := os.Stat(home)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(home, 0o711)
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o011 == 0o011 {
		return nil
	}
	perm := fi.Mode().Perm() | 0o011
	if err := os.Chmod(home, perm); err != nil {
		return fmt.Errorf("make %s searchable for the sandbox (chmod go+x %s): %w", home, home, err)
	}
	fmt.Fprintf(e.stderr, "nanofleet: %s is now mode %#o (was %#o) so that exec and MCP servers, which run as another user, can reach the workspace\n", home, perm, fi.Mode().Perm())
	return nil
}

func (e *environment) logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
}

// connect joins the running fleet: the NATS of the config or --nats, else
// the fleet running on the data directory.
func (e *environment) connect(ctx context.Context, c *common) (*bus.Bus, error) {
	file, err := e.load(c)
	if err != nil {
		return nil, err
	}
	if file.NATS.URL == "" {
		if file.NATS.URL, err = findFleet(ctx, c.dataDir); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := bus.Connect(cctx, svc.BusConfig(file, "nanofleet-cli"))
	if err != nil {
		return nil, fmt.Errorf("join the fleet: %w", err)
	}
	// A server without the fleet's inbound stream has no fleet: say so,
	// as agent and chat do, rather than show empty tables. Any other
	// answer (a stream without a leader) is for the command to show.
	if _, err := b.JS.Stream(cctx, b.Space.InboundStream()); errors.Is(err, jetstream.ErrStreamNotFound) {
		b.Close()
		return nil, fmt.Errorf("%w: no fleet at %s yet (stream %s does not exist); start the fleet's services first",
			fleet.ErrNoFleet, b.NC.ConnectedUrlRedacted(), b.Space.InboundStream())
	}
	return b, nil
}

// withFleet runs run joined to the running fleet (see connect).
func (e *environment) withFleet(ctx context.Context, c *common, run func(b *bus.Bus) error) error {
	b, err := e.connect(ctx, c)
	if err != nil {
		return err
	}
	defer b.Close()
	return run(b)
}

// findFleet returns the NATS URL, with credentials, of the fleet running
// on dataDir, waiting a while for one that is starting.
func findFleet(ctx context.Context, dataDir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := fleetdir.Find(ctx, dataDir)
	if errors.Is(err, fleetdir.ErrNotRunning) {
		return "", fmt.Errorf("%w; start one with `nanofleet run` (or pass --nats URL)", err)
	}
	if err != nil {
		return "", err
	}
	return r.URL()
}
