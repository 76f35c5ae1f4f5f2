package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/wsfile"
	"github.com/nanofleet/nanofleet/services/nanofleet/onboard"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

func onboardCmd(_ context.Context, env *environment, args []string) error {
	var cfgPath, ws string
	var force bool
	line := &cmd{name: "onboard", summary: "Write the config file and the workspace templates (AGENTS.md, SOUL.md, …); files that exist are kept.",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&cfgPath, "config", filepath.Join(env.home(), "config.json"), "config `file` to write")
			fs.StringVar(&ws, "workspace", filepath.Join(env.home(), "workspace"), "workspace `directory` to create; the config names it")
			fs.BoolVar(&force, "force", false, "overwrite existing files")
		}}
	if _, err := line.parse(env.stdout, args); err != nil {
		return err
	}
	if err := wsfile.CheckWorkspaceRoot(ws); err != nil {
		return fmt.Errorf("onboard: --workspace: %w", err)
	}
	var opts []onboard.Option
	if os.Geteuid() == 0 {
		uid, gid := sandboxUser(env, cfgPath, ws, force)
		opts = append(opts, onboard.WithOwner(uid, gid))
	}
	res, err := onboard.Write(cfgPath, ws, force, opts...)
	if err != nil {
		return err
	}
	for _, p := range res.Wrote {
		fmt.Fprintln(env.stdout, "wrote", p)
	}
	for _, p := range res.Kept {
		fmt.Fprintln(env.stdout, "kept ", p)
	}
	fmt.Fprintf(env.stdout, "\nNext: set OPENAI_API_KEY (and OPENAI_BASE_URL, NANOFLEET_MODEL for another OpenAI-compatible host), or edit %s.\n"+
		"Then start the fleet with `nanofleet run` and, in another terminal, talk to it with `nanofleet agent -m \"Hello\"` or `nanofleet chat`\n"+
		"(without a running fleet, agent and chat run one for themselves until they exit).\n", cfgPath)
	return nil
}

// sandboxUser is the host user exec runs as under a root fleet
// (tools.exec.hostUid and hostGid): that of the config onboard keeps, else
// the defaults its template leaves. A kept config that does not load
// leaves the defaults; run names its faults.
func sandboxUser(env *environment, cfgPath, ws string, force bool) (uid, gid int) {
	def := sandbox.DefaultConfig()
	uid, gid = def.HostUID, def.HostGID
	if force {
		return uid, gid
	}
	if _, err := os.Stat(cfgPath); err != nil {
		return uid, gid
	}
	file, err := config.Load(cfgPath, env.getenv, false)
	if err != nil {
		return uid, gid
	}
	rc, err := runner.FromFile(file, ws)
	if err != nil {
		return uid, gid
	}
	return rc.Exec.HostUID, rc.Exec.HostGID
}
