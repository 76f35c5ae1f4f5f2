package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/schedule"
	"github.com/nanofleet/nanofleet/services/agent-worker/heartbeat"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
)

// ScheduleSection is the config file's "schedule" section: the heartbeat
// job and subagents (cron jobs themselves are made by the model).
type ScheduleSection struct {
	Heartbeat struct {
		Enabled       *bool  `json:"enabled,omitempty"`
		IntervalS     int    `json:"intervalS,omitempty"`
		KeepTurns     int    `json:"keepTurns,omitempty"`
		NotifyChannel string `json:"notifyChannel,omitempty"`
		NotifyChat    string `json:"notifyChat,omitempty"`
	} `json:"heartbeat"`
	Subagents struct {
		MaxPerSession int `json:"maxPerSession,omitempty"`
	} `json:"subagents"`
}

// jobs are the time and delegation parts that run beside every worker:
// the relay turning schedule fires into turns, the subagent announcer and
// the heartbeat notifier. Each is safe to run in every worker.
type jobs struct {
	tools []agenttool.Tool
	run   []func(context.Context) error
}

func openJobs(ctx context.Context, b *bus.Bus, file *config.File, loc *time.Location, profiles *profile.Cache, log *slog.Logger) (*jobs, error) {
	var sec ScheduleSection
	if err := file.Section("schedule", &sec); err != nil {
		return nil, err
	}
	sched, err := schedule.Open(ctx, b)
	if err != nil {
		return nil, err
	}
	cron, err := schedule.NewTool(sched, schedule.WithLocation(loc))
	if err != nil {
		return nil, err
	}
	scfg := subagent.DefaultConfig()
	if n := sec.Subagents.MaxPerSession; n != 0 {
		scfg.MaxPerSession = n
	}
	subs, err := subagent.New(ctx, b, scfg, log.With("component", "subagent"))
	if err != nil {
		return nil, config.Invalid("schedule.subagents", "%v", err)
	}
	hcfg := heartbeat.DefaultConfig()
	if sec.Heartbeat.Enabled != nil {
		hcfg.Enabled = *sec.Heartbeat.Enabled
	}
	if sec.Heartbeat.IntervalS != 0 {
		hcfg.Every = time.Duration(sec.Heartbeat.IntervalS) * time.Second
	}
	if sec.Heartbeat.KeepTurns != 0 {
		hcfg.KeepTurns = sec.Heartbeat.KeepTurns
	}
	hcfg.NotifyChannel, hcfg.NotifyChat = sec.Heartbeat.NotifyChannel, sec.Heartbeat.NotifyChat
	hb, err := heartbeat.New(ctx, b, sched, profiles, hcfg, log.With("component", "heartbeat"))
	if err != nil {
		return nil, config.Invalid("schedule.heartbeat", "%v", err)
	}
	if err := hb.Ensure(ctx); err != nil {
		return nil, fmt.Errorf("heartbeat job: %w", err)
	}
	relay, err := schedule.NewRelay(ctx, b, log.With("component", "schedule"), schedule.WithPrepare(hb.Prepare))
	if err != nil {
		return nil, err
	}
	return &jobs{
		tools: []agenttool.Tool{cron, subs.Tool()},
		run:   []func(context.Context) error{relay.Run, subs.Run, hb.Run},
	}, nil
}
