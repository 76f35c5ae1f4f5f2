package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/schedule"
)

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
						return removeJob(ctx, s, session, args[0], env.stdout)
					})
				}},
		},
	}
	return set.run(env.stdout, args)
}

// removeJob removes a job.
func removeJob(ctx context.Context, s *schedule.Scheduler, session, id string, stdout io.Writer) error {
	j, err := s.Remove(ctx, session, id)
	if err != nil {
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
	for _, j := range jobs {
		next, in := "unknown", "-"
		if !j.Next.IsZero() {
			next = j.NextString()
			in = j.Next.Sub(now).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.SessionKey, j.Spec, next, in, j.MessageLine(50))
	}
	_ = tw.Flush()
}
