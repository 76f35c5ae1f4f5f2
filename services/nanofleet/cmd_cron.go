package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/schedule"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// errConfigJob refuses to remove a job the config makes (the heartbeat):
// the next start would make it again.
var errConfigJob = errors.New("it comes from the config")

func cronCmd(ctx context.Context, env *environment, args []string) error {
	var c common
	var session string
	sessionFlag := func(fs *flag.FlagSet) {
		fs.StringVar(&session, "session", "", "only the jobs of session `KEY` (e.g. telegram:12345)")
	}
	withSchedule := func(run func(s *schedule.Scheduler) error) error {
		return env.withFleet(ctx, &c, func(b *bus.Bus) error {
			s, err := schedule.Open(ctx, b)
			if err != nil {
				return err
			}
			return run(s)
		})
	}
	set := &commandSet{
		name:    "cron",
		summary: "List or remove the fleet's scheduled jobs: those sessions made with the cron tool, and the heartbeat.",
		flags:   func(fs *flag.FlagSet) { env.registerClient(fs, &c) },
		subs: []subcommand{
			{name: "list", synopsis: "[--session KEY]", summary: "list the jobs with their next fire time", flags: sessionFlag,
				run: func([]string) error {
					return withSchedule(func(s *schedule.Scheduler) error {
						jobs, err := s.List(ctx, session)
						if err != nil {
							return err
						}
						writeJobs(env.stdout, jobs, time.Now())
						return nil
					})
				}},
			{name: "remove", synopsis: "[--session KEY] JOB_ID", summary: "remove a job (--session when its id is in several sessions)",
				minArgs: 1, maxArgs: 1, argNames: "JOB_ID", flags: sessionFlag,
				run: func(args []string) error {
					return withSchedule(func(s *schedule.Scheduler) error {
						return removeJob(ctx, s, session, args[0], c.configPath, env.stdout)
					})
				}},
		},
	}
	return set.run(env.stdout, args)
}

// removeJob removes a job, unless the config makes it: that one would be
// back at the next start, and the config is where it is turned off.
func removeJob(ctx context.Context, s *schedule.Scheduler, session, id, configPath string, stdout io.Writer) error {
	j, err := s.Find(ctx, session, id)
	if err != nil {
		return err
	}
	if j.Kind == nanofleetv1.InboundKind_INBOUND_KIND_HEARTBEAT {
		return fmt.Errorf("job %s of %s is the heartbeat: %w (schedule.heartbeat) and every start makes it again, so it can be seen but not removed here; "+
			"to turn it off, set schedule.heartbeat.enabled to false in %s and restart the fleet", j.ID, j.SessionKey, errConfigJob, configPath)
	}
	if j, err = s.Remove(ctx, j.SessionKey, j.ID); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed job %s of %s (%s)\n", j.ID, j.SessionKey, j.Spec)
	return nil
}

func writeJobs(w io.Writer, jobs []schedule.Job, now time.Time) {
	if len(jobs) == 0 {
		fmt.Fprintln(w, "no scheduled jobs")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSESSION\tSCHEDULE\tNEXT\tIN\tMESSAGE")
	heartbeat := false
	for _, j := range jobs {
		next, in := "unknown", "-"
		if !j.Next.IsZero() {
			next = j.NextString()
			in = j.Next.Sub(now).Round(time.Second).String()
		}
		heartbeat = heartbeat || j.Kind == nanofleetv1.InboundKind_INBOUND_KIND_HEARTBEAT
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.SessionKey, j.Spec, next, in, j.MessageLine(50))
	}
	_ = tw.Flush()
	if heartbeat {
		fmt.Fprintln(w, "(the heartbeat comes from the config, schedule.heartbeat: it can be seen but not removed here; schedule.heartbeat.enabled: false turns it off)")
	}
}
