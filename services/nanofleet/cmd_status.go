package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

func statusCmd(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var c common
	env.register(fs, &c)
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := env.connect(ctx, &c)
	if err != nil {
		return err
	}
	defer b.Close()
	st, err := fleet.GetStatus(ctx, b, 500*time.Millisecond)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STREAM\tMESSAGES\tBYTES")
	for _, s := range st.Streams {
		fmt.Fprintf(w, "%s\t%d\t%d\n", s.Name, s.Msgs, s.Bytes)
	}
	fmt.Fprintln(w, "\nCONSUMER\tPENDING\tIN FLIGHT\tREDELIVERED\tWAITING PULLS")
	for _, c := range st.Consumers {
		fmt.Fprintf(w, "%s/%s\t%d\t%d\t%d\t%d\n", c.Stream, c.Name, c.Pending, c.InFlight, c.Redelivered, c.Waiting)
	}
	fmt.Fprintln(w, "\nSERVICE\tONLINE")
	for _, name := range []string{"agent-worker", "tool-runner", "memory-consolidator", "channel-gateway"} {
		fmt.Fprintf(w, "%s\t%d\n", name, st.Online(name))
	}
	return w.Flush()
}
