package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/mdp/qrterminal/v3"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

func channelsCmd(ctx context.Context, env *environment, args []string) error {
	var c common
	var timeout time.Duration
	set := &commandSet{
		name:    "channels",
		summary: "See the fleet's chat channels and link the WhatsApp account.",
		flags:   func(fs *flag.FlagSet) { env.registerClient(fs, &c) },
		subs: []subcommand{
			{name: "status", summary: "each configured channel's state, account and gateway, and why one is not running",
				run: func([]string) error { return channelsStatus(ctx, env, &c) }},
			{name: "login", synopsis: "whatsapp [--timeout DURATION]", summary: "link the WhatsApp account: show the QR code to scan until it is linked",
				minArgs: 1, maxArgs: 1, argNames: "the channel: whatsapp",
				flags: func(fs *flag.FlagSet) {
					fs.DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the QR code to be scanned")
				},
				run: func(args []string) error {
					if args[0] != "whatsapp" {
						return badArg("only whatsapp links by QR code, not %q", args[0])
					}
					return whatsappLogin(ctx, env, &c, timeout)
				}},
		},
	}
	return set.run(env.stdout, args)
}

// channelsStatus lists each configured channel with its state, account
// and the gateway running it.
func channelsStatus(ctx context.Context, env *environment, c *common) error {
	file, err := env.load(c)
	if err != nil {
		return err
	}
	cfg, err := channels.FromFile(file)
	if err != nil {
		return err
	}
	b, board, err := openBoard(ctx, env, c)
	if err != nil {
		return err
	}
	defer b.Close()
	leases, err := b.KV(ctx, bus.BucketLeases)
	if err != nil {
		return err
	}
	recs, err := board.Channels(ctx, lease.NewTable(leases), cfg.Enabled())
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CHANNEL\tSTATE\tACCOUNT\tHOLDER\tSINCE\tREASON")
	for _, r := range recs {
		since := "-"
		if !r.Updated.IsZero() {
			since = r.Updated.Local().Format(time.DateTime)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Channel, r.State, dash(r.Account), dash(r.Holder), since, r.Reason)
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func openBoard(ctx context.Context, env *environment, c *common) (*bus.Bus, *status.Board, error) {
	b, err := env.connect(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	board, err := status.Open(ctx, b)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return b, board, nil
}

// errNotLinked: whatsappLogin's --timeout passed before the scan.
var errNotLinked = errors.New("not linked")

// whatsappLogin shows the QR codes the gateway holding the WhatsApp
// connection reports, until the account is linked or timeout passes.
func whatsappLogin(ctx context.Context, env *environment, c *common, timeout time.Duration) error {
	b, board, err := openBoard(ctx, env, c)
	if err != nil {
		return err
	}
	defer b.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	updates, err := board.Watch(wctx, "whatsapp")
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, "waiting for the gateway running channels.whatsapp (start it with `nanofleet run` if it is not running)…")
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	shown := ""
	for {
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-deadline.C:
			return fmt.Errorf("whatsapp login: %w within %s (--timeout)", errNotLinked, timeout)
		case r, ok := <-updates:
			if !ok {
				return errInterrupted // the watch ends with ctx
			}
			switch {
			case r.State == status.Linking && r.QR != "" && r.QR != shown:
				shown = r.QR
				fmt.Fprintln(env.stdout, "\nScan this code in WhatsApp: Settings → Linked devices → Link a device")
				qrterminal.GenerateWithConfig(r.QR, qrterminal.Config{
					Level: qrterminal.L, Writer: env.stdout, HalfBlocks: true,
					BlackChar: qrterminal.BLACK_BLACK, WhiteBlackChar: qrterminal.WHITE_BLACK,
					WhiteChar: qrterminal.WHITE_WHITE, BlackWhiteChar: qrterminal.BLACK_WHITE, QuietZone: 1,
				})
			case r.State == status.Connected && r.Account != "":
				fmt.Fprintf(env.stdout, "WhatsApp linked as %s (gateway %s)\n", r.Account, r.Holder)
				return nil
			case r.State == status.Failed:
				fmt.Fprintf(env.stdout, "the gateway reports: %s\n", r.Reason)
			}
		}
	}
}
