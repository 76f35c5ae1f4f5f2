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
)

// errCronUsage is returned for bad cron arguments; the usage text has been
// written to the output.
var errCronUsage = errors.New("usage: nanofleet cron list [--session KEY] | nanofleet cron remove [--session KEY] JOB_ID")

func cronCmd(ctx context.Context, env *environment, args []string) error {
	return env.joinFleet(ctx, flag.NewFlagSet("cron", flag.ContinueOnError), args, nil, func(b *bus.Bus, _ *common, rest []string) error {
		return runCron(ctx, b, rest, env.stdout)
	})
}

// runCron is `nanofleet cron list|remove`: it lists jobs with their next
// fire time, or removes one. args excludes "cron".
func runCron(ctx context.Context, b *bus.Bus, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stdout, errCronUsage)
		return errCronUsage
	}
	fs := flag.NewFlagSet("cron "+args[0], flag.ContinueOnError)
	fs.SetOutput(stdout)
	sessionKey := fs.String("session", "", "only this session's jobs (e.g. telegram:12345)")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %w", errCronUsage, err)
	}
	s, err := schedule.Open(ctx, b)
	if err != nil {
		return err
	}
	switch {
	case args[0] == "list" && fs.NArg() == 0:
		jobs, err := s.List(ctx, *sessionKey)
		if err != nil {
			return err
		}
		writeJobs(stdout, jobs, time.Now())
		return nil
	case args[0] == "remove" && fs.NArg() == 1:
		j, err := s.Remove(ctx, *sessionKey, fs.Arg(0))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed job %s of %s (%s)\n", j.ID, j.SessionKey, j.Spec)
		return nil
	}
	fmt.Fprintln(stdout, errCronUsage)
	return errCronUsage
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
