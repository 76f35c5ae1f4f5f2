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

const channelsUsage = "usage: nanofleet channels status | nanofleet channels login whatsapp"

func channelsCmd(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("channels", flag.ContinueOnError)
	var c common
	env.register(fs, &c)
	timeout := fs.Duration("timeout", 5*time.Minute, "login: how long to wait for the QR code to be scanned")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	switch {
	case len(rest) == 1 && rest[0] == "status":
		return channelsStatus(ctx, env, &c)
	case len(rest) == 2 && rest[0] == "login" && rest[1] == "whatsapp":
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return whatsappLogin(ctx, env, &c)
	}
	return errors.New(channelsUsage)
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

// whatsappLogin shows the QR codes the gateway holding the WhatsApp
// connection reports, until the account is linked.
func whatsappLogin(ctx context.Context, env *environment, c *common) error {
	b, board, err := openBoard(ctx, env, c)
	if err != nil {
		return err
	}
	defer b.Close()
	updates, err := board.Watch(ctx, "whatsapp")
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, "waiting for the gateway running channels.whatsapp (start it with `nanofleet run` if it is not running)…")
	shown := ""
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("whatsapp login: %w", ctx.Err())
		case r, ok := <-updates:
			if !ok {
				return fmt.Errorf("whatsapp login: %w", ctx.Err())
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
