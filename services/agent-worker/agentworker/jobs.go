package agentworker

import (
	"context"
	"errors"
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
// job and subagents (cron jobs themselves are made by the model), each
// decoded straight into its owner's Config.
type ScheduleSection struct {
	Heartbeat heartbeat.Config `json:"heartbeat"`
	Subagents subagent.Config  `json:"subagents"`
}

// jobs are the time and delegation parts that run beside every worker:
// the relay turning schedule fires into turns, the subagent announcer and
// the heartbeat notifier. Each is safe to run in every worker.
type jobs struct {
	tools []agenttool.Tool
	run   []func(context.Context) error
}

// Schedule decodes the file's "schedule" section over the owners'
// defaults and validates it.
func Schedule(file *config.File) (ScheduleSection, error) {
	sec := ScheduleSection{Heartbeat: heartbeat.DefaultConfig(), Subagents: subagent.DefaultConfig()}
	// What decoded past a refused key is checked too: one start names
	// every problem of the section.
	err := file.Section("schedule", &sec)
	return sec, errors.Join(err, sec.Heartbeat.Validate(), sec.Subagents.Validate())
}

func openJobs(ctx context.Context, b *bus.Bus, file *config.File, loc *time.Location, profiles *profile.Cache, log *slog.Logger) (*jobs, error) {
	sec, err := Schedule(file)
	if err != nil {
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
	subs, err := subagent.New(ctx, sec.Subagents, b, subagent.WithLogger(log))
	if err != nil {
		return nil, err
	}
	hb, err := heartbeat.New(ctx, sec.Heartbeat, heartbeat.Deps{Bus: b, Scheduler: sched, Profiles: profiles}, heartbeat.WithLogger(log))
	if err != nil {
		return nil, err
	}
	if err := hb.Ensure(ctx); err != nil {
		return nil, fmt.Errorf("heartbeat job: %w", err)
	}
	relay, err := schedule.NewRelay(ctx, b, schedule.WithLogger(log), schedule.WithPrepare(hb.Prepare))
	if err != nil {
		return nil, err
	}
	return &jobs{
		tools: []agenttool.Tool{cron, subs.Tool()},
		run:   []func(context.Context) error{relay.Run, subs.Run, hb.Run},
	}, nil
}
