package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mdp/qrterminal/v3"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
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
// and the gateway running it, as the running gateways report it; under a
// channel, a row for each running gateway that says something else (a
// gateway whose start is retried beside the one connected).
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
	svcs, err := fleetstatus.Discover(ctx, b.NC, gatewayDiscovery)
	if err != nil {
		return err
	}
	chans, err := board.Channels(ctx, lease.NewTable(leases), svcs, cfg.Enabled())
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CHANNEL\tSTATE\tACCOUNT\tHOLDER\tSINCE\tREASON")
	row := func(channel string, r status.Record) {
		since := "-"
		if !r.Updated.IsZero() {
			since = r.Updated.Local().Format(time.DateTime)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", channel, r.State, cmp.Or(r.Account, "-"), cmp.Or(r.Holder, "-"), since, r.Reason)
	}
	for _, c := range chans {
		row(c.Channel, c.Record)
		for _, o := range c.Others {
			row("", o) // indented under its channel: another gateway's word
		}
	}
	return w.Flush()
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

// errNotEnabled: the running fleet's gateways do not run the channel.
var errNotEnabled = errors.New("not enabled in the running fleet's config")

// errNotLinked: whatsappLogin's --timeout passed before the scan.
var errNotLinked = errors.New("not linked")

// gatewayDiscovery is how long channels status and login listen for the
// gateways' answers to discovery; they answer at once.
const gatewayDiscovery = 500 * time.Millisecond

// whatsappLogin shows the QR codes the gateway holding the WhatsApp
// connection reports, until the account is linked or timeout passes. When
// gateways run and none runs WhatsApp it says so at once: no code would
// come.
func whatsappLogin(ctx context.Context, env *environment, c *common, timeout time.Duration) error {
	b, board, err := openBoard(ctx, env, c)
	if err != nil {
		return err
	}
	defer b.Close()
	svcs, err := fleetstatus.Discover(ctx, b.NC, gatewayDiscovery)
	if err != nil {
		return err
	}
	online, runs := runsChannel(svcs, "whatsapp")
	if online > 0 && !runs {
		return fmt.Errorf("channels.whatsapp is %w (%s); set channels.whatsapp.enabled to true in its config file and restart the fleet, then run `nanofleet channels login whatsapp` again",
			errNotEnabled, gatewaysChannels(svcs))
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// What running gateways reported, and every report from now on: a
	// gateway that is gone may have left a "connected" behind.
	updates, err := board.Watch(wctx, "whatsapp", status.Running(svcs))
	if err != nil {
		return err
	}
	if online == 0 {
		fmt.Fprintln(env.stdout, "waiting for a gateway with channels.whatsapp enabled: none runs yet (`nanofleet run` starts one, unless --no-gateway)…")
	} else {
		fmt.Fprintln(env.stdout, "waiting for the gateway running channels.whatsapp to show the QR code…")
	}
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

// runsChannel counts the gateways online and reports whether one of them
// runs channel, or may: a gateway that does not announce its channels
// is taken to run it.
func runsChannel(svcs []fleetstatus.Service, channel string) (online int, runs bool) {
	for _, s := range svcs {
		if s.Name != fleetstatus.GatewayService {
			continue
		}
		online++
		names, ok := s.Channels()
		runs = runs || !ok || slices.Contains(names, channel)
	}
	return online, runs
}

// gatewaysChannels says what the gateways online run.
func gatewaysChannels(svcs []fleetstatus.Service) string {
	var runs []string
	n := 0
	for _, s := range svcs {
		if names, ok := s.Channels(); ok && s.Name == fleetstatus.GatewayService {
			n++
			runs = append(runs, names...)
		}
	}
	slices.Sort(runs)
	runs = slices.Compact(runs)
	what := "no channel"
	if len(runs) > 0 {
		what = strings.Join(runs, ", ")
	}
	if n > 1 {
		return fmt.Sprintf("its %d gateways run %s", n, what)
	}
	return "its gateway runs " + what
}
