package fleet

import (
	"errors"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/memoryconsolidator"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
)

// CheckSections decodes and validates the sections of file the fleet's
// parts own (tools, worker, schedule, memory, and channels with a
// gateway) and the model's settings (providers, as the worker and the
// consolidator read them with getenv), and names every bad key among
// them; workspace is the fleet's.
// Start calls it before any part starts, so that a file with bad keys in
// several sections (a config pasted from nanobot) is refused once, naming
// all of them, rather than one part at a time, each after the embedded
// server has started.
func CheckSections(file *config.File, getenv func(string) string, workspace string, gateway bool) error {
	model := llm.CheckFile(file, getenv)
	_, tools := runner.FromFile(file, workspace)
	_, _, worker := agentworker.ConfigFrom(file, "check", workspace)
	_, schedule := agentworker.Schedule(file)
	_, _, _, _, memory := memoryconsolidator.Configs(file, "check")
	var chans error
	if gateway {
		_, chans = channels.FromFile(file)
	}
	return errors.Join(model, tools, worker, schedule, memory, chans)
}
