// Package memoryconsolidator assembles the memory-consolidator from the fleet's
// config: the consolidator of requests, Dream, and the workspace file
// sync. The memory-consolidator binary and the all-in-one use it.
package memoryconsolidator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/usage"
	"github.com/nanofleet/nanofleet/pkg/wsfile"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/consolidator"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/dream"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/filesync"
)

// Section is the config file's "memory" section: the worker's settings
// (memory.Config) and the consolidator's, each part decoded straight into
// the Config of the package it tunes.
type Section struct {
	memory.Config
	Consolidator consolidator.Config `json:"consolidator"`
	Dream        DreamSection        `json:"dream"`
	Sync         SyncSection         `json:"sync"`
}

// DreamSection is memory.dream: Dream's config and whether it runs.
type DreamSection struct {
	dream.Config
	// Enabled defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
}

// SyncSection is memory.sync.
type SyncSection struct {
	// Enabled defaults to true when the service has a workspace.
	Enabled     *bool `json:"enabled,omitempty"`
	PollSeconds int   `json:"pollSeconds,omitempty"`
}

// Deps are what the process gives the service besides the config file.
type Deps struct {
	// Bus is the fleet's connection; the layout and [Assets] must have
	// been provisioned.
	Bus *bus.Bus
	// Getenv reads the model's API key; nil means os.Getenv.
	Getenv func(string) string
	// ID names this consolidator; default hostname-pid.
	ID string
	// Workspace is the directory synced with JetStream; empty disables
	// the sync.
	Workspace string
	// Model overrides the provider built from the config (tests).
	Model   llm.Client
	Metrics *observe.Metrics
}

// Option changes an optional setting of [New].
type Option func(*Service)

// WithLogger sets the service's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = observe.OrDiscard(l) } }

// Service is an assembled memory-consolidator.
type Service struct {
	nc           *nats.Conn
	id           string
	Consolidator *consolidator.Consolidator
	Dream        *dream.Job
	Sync         *filesync.Syncer
	log          *slog.Logger
}

// Assets declares the JetStream assets the service uses besides the core
// layout: the memory streams and buckets, and the usage bucket its
// consolidations' tokens are counted in.
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.Join(memory.Assets, usage.Assets)(sp, l)
}

// Configs turns the config file into the parts' configs; dream is
// returned with ok false when disabled.
func Configs(file *config.File, id string) (consolidator.Config, dream.Config, bool, Section, error) {
	sec := Section{Config: memory.DefaultConfig(), Consolidator: consolidator.DefaultConfig(),
		Dream: DreamSection{Config: dream.DefaultConfig()}}
	// What decoded past a refused key is checked too, and every part:
	// one start names every problem of the section.
	decodeErr := file.Section("memory", &sec)
	cc := sec.Consolidator
	cc.ID = id
	dc := sec.Dream.Config
	dc.ID, dc.Agent = id, cmp.Or(sec.Agent, memory.DefaultConfig().Agent)
	if err := errors.Join(decodeErr, sec.Config.Validate(), cc.Validate(), dc.Validate()); err != nil {
		return cc, dc, false, sec, err
	}
	return cc, dc, sec.Dream.Enabled == nil || *sec.Dream.Enabled, sec, nil
}

// New assembles the service. The bus layout and [Assets] must have been
// provisioned.
func New(ctx context.Context, file *config.File, o Deps, opts ...Option) (*Service, error) {
	if file == nil || o.Bus == nil {
		return nil, errors.New("memory-consolidator: the config file and the bus are required")
	}
	s := &Service{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(s)
	}
	b := o.Bus
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.ID == "" {
		o.ID = fleetstatus.DefaultID()
	}
	cc, dc, dreamOn, sec, err := Configs(file, o.ID)
	if err != nil {
		return nil, err
	}
	model := o.Model
	if model == nil {
		if model, err = Model(file, o.Getenv, s.log); err != nil {
			return nil, err
		}
	}
	s.nc, s.id = b.NC, o.ID
	s.Consolidator, err = consolidator.New(ctx, cc, consolidator.Deps{
		Bus: b, Model: model, Observer: observer(o.Metrics),
	}, consolidator.WithLogger(s.log.With("part", "consolidator")))
	if err != nil {
		return nil, err
	}
	if dreamOn {
		if s.Dream, err = dream.New(ctx, dc, dream.Deps{Bus: b, Model: model}, dream.WithLogger(s.log.With("part", "dream"))); err != nil {
			return nil, err
		}
	}
	syncOn := o.Workspace != "" && (sec.Sync.Enabled == nil || *sec.Sync.Enabled)
	if syncOn {
		if err := wsfile.CheckWorkspaceRoot(o.Workspace); err != nil {
			return nil, fmt.Errorf("memory-consolidator: --workspace: %w", err)
		}
		s.Sync, err = filesync.New(ctx, filesync.Config{
			Workspace: o.Workspace, Agent: dc.Agent, Poll: config.SecondsDuration(sec.Sync.PollSeconds),
			EditableProfile: file.EditableProfile(),
		}, b, filesync.WithLogger(s.log.With("part", "filesync")))
		if err != nil {
			return nil, err
		}
		// The workspace's files reach JetStream before the service is up,
		// so before the all-in-one takes its first turn: a one-shot
		// `agent -m` on a nanobot workspace ran without its MEMORY.md.
		if err := s.Sync.SyncOnce(ctx); err != nil {
			s.log.Warn("filesync: first sync", "err", err)
		}
	}
	return s, nil
}

// Model builds the model provider from the config and environment
// ([llm.NewFromFile], with llm's default retries). Without
// an API key the service still runs: every consolidation then archives the
// raw turns, so nothing is lost until a key is set.
func Model(file *config.File, getenv func(string) string, log *slog.Logger) (llm.Client, error) {
	c, _, err := llm.NewFromFile(file, getenv, 0, "consolidations archive raw turns", llm.WithLogger(log))
	return c, err
}

// Run runs the parts until ctx ends; the first part to fail stops the
// others.
func (s *Service) Run(ctx context.Context) error {
	stopAnnounce, err := fleetstatus.Register(ctx, s.nc, fleetstatus.ConsolidatorService, s.id)
	if err != nil {
		return err
	}
	defer stopAnnounce()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				once.Do(func() { first = fmt.Errorf("%s: %w", name, err) })
				cancel(err)
			}
		}()
	}
	run("consolidator", s.Consolidator.Run)
	if s.Dream != nil {
		run("dream", s.Dream.Run)
	}
	if s.Sync != nil {
		defer s.Sync.Close()
		run("filesync", s.Sync.Run)
	}
	wg.Wait()
	return first
}

func observer(m *observe.Metrics) consolidator.Observer {
	if m == nil {
		return consolidator.Observer{}
	}
	return consolidator.Observer{Done: func(outcome string, _ time.Duration) {
		if outcome == "dead_letter" {
			m.DeadLetters.WithLabelValues(consolidator.DeadLetterSource).Inc()
		}
	}}
}
