package fleet

import (
	"errors"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/memoryconsolidator"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
)

// checkConfig decodes every section the fleet's parts read before any of
// them starts, so that a file with bad keys in several sections (a config
// pasted from nanobot) is refused once, naming all of them, rather than
// one part at a time, each after the embedded server has started.
func checkConfig(o Options) error { return CheckSections(o.File, o.Workspace, o.Gateway) }

// CheckSections decodes and validates the sections of file the fleet's
// parts own (tools, worker, schedule, memory, and channels with a
// gateway) and names every bad key among them; workspace is the fleet's.
func CheckSections(file *config.File, workspace string, gateway bool) error {
	o := Options{File: file, Workspace: workspace, Gateway: gateway}
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	_, err := runner.FromFile(o.File, o.Workspace)
	keep(err)
	_, _, err = agentworker.ConfigFrom(o.File, "check", o.Workspace)
	keep(err)
	_, err = agentworker.Schedule(o.File)
	keep(err)
	_, _, _, _, err = memoryconsolidator.Configs(o.File, "check")
	keep(err)
	if o.Gateway {
		_, err = channels.FromFile(o.File)
		keep(err)
	}
	return errors.Join(errs...)
}
