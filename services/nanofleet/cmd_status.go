package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

func statusCmd(ctx context.Context, env *environment, args []string) error {
	var c common
	var usageTop int
	line := &cmd{name: "status", summary: "Show the fleet's streams, consumers, the services online and the tokens used per model, user and session.",
		flags: func(fs *flag.FlagSet) {
			env.registerClient(fs, &c)
			fs.IntVar(&usageTop, "usage-top", 5, "token usage: how many models, users and sessions to list (0: skip reading the history)")
		}}
	if _, err := line.parse(env.stdout, args); err != nil {
		return err
	}
	return env.withFleet(ctx, &c, func(b *bus.Bus) error {
		st, err := fleet.GetStatus(ctx, b, 500*time.Millisecond)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "STREAM\tMESSAGES\tBYTES")
		for _, s := range st.Streams {
			fmt.Fprintf(w, "%s\t%d\t%d\n", s.Name, s.Msgs, s.Bytes)
		}
		for _, u := range st.Unreadable {
			fmt.Fprintf(w, "%s\t?\t?\tno answer: %s\n", u.Stream, u.Err)
		}
		writeConsumers(w, st.Consumers)
		fmt.Fprintln(w, "\nSERVICE\tONLINE")
		for _, name := range []string{"agent-worker", "tool-runner", "memory-consolidator", "channel-gateway"} {
			fmt.Fprintf(w, "%s\t%d\n", name, st.Online(name))
		}
		if hist, ok := st.Stream(b.Space.HistoryStream()); ok && usageTop > 0 {
			u := fleetstatus.NewUsage(b.Space)
			if err := u.Update(ctx, b.Direct, hist); err != nil {
				fmt.Fprintf(w, "\nTOKENS\tunknown: %v\n", err)
			} else {
				writeUsage(w, u.Summary(usageTop))
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if n := len(st.Unreadable); n > 0 {
			return fmt.Errorf("%d of the fleet's streams did not answer; in a cluster, a stream whose leader's node went down answers again once its replicas elect a new leader (seconds)", n)
		}
		return nil
	})
}

// writeConsumers prints the fleet's durable consumers, then counts the
// clients' ephemeral ones: listed by their generated names, those of a
// CLI command that has just exited read as a backlog nobody serves.
func writeConsumers(w io.Writer, consumers []fleetstatus.Consumer) {
	fmt.Fprintln(w, "\nCONSUMER\tPENDING\tIN FLIGHT\tREDELIVERED\tWAITING PULLS")
	var clients int
	var reaped time.Duration
	for _, c := range consumers {
		if c.Ephemeral {
			clients++
			reaped = max(reaped, c.InactiveThreshold)
			continue
		}
		fmt.Fprintf(w, "%s/%s\t%d\t%d\t%d\t%d\n", c.Stream, c.Name, c.Pending, c.InFlight, c.Redelivered, c.Waiting)
	}
	switch {
	case clients == 0:
	case reaped > 0:
		fmt.Fprintf(w, "(and %d client consumer(s): CLI commands, gateway watches; each deleted at most %s after its client's last pull)\n", clients, reaped)
	default:
		fmt.Fprintf(w, "(and %d client consumer(s): CLI commands, gateway watches)\n", clients)
	}
}

// writeUsage prints the token usage over the turn records the history
// stream keeps: the total, then the top models, users and sessions.
func writeUsage(w io.Writer, s fleetstatus.UsageSummary) {
	fmt.Fprintln(w, "\nTOKENS (turns kept in history)\tTURNS\tMODEL CALLS\tPROMPT\tCACHED\tCOMPLETION\tREASONING")
	row := func(label string, t fleetstatus.Tokens) {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", label, t.Turns, t.ModelCalls, t.Prompt, t.Cached, t.Completion, t.Reasoning)
	}
	row("total", s.Total)
	for _, g := range []struct {
		name string
		ts   []fleetstatus.Tokens
	}{{"model", s.Models}, {"user", s.Users}, {"session", s.Sessions}} {
		for _, t := range g.ts {
			row(g.name+" "+t.Key, t)
		}
	}
}
