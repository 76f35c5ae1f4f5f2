// Command nanofleet is the all-in-one nanofleet: the whole fleet in one
// process around an embedded NATS server, and the operator's CLI.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, env *environment, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"run":      {"run the whole fleet in this process (embedded NATS unless --nats)", runCmd},
		"agent":    {"send one message (-m TEXT) and print the reply; without -m, chat", agentCmd},
		"chat":     {"chat interactively in the terminal", chatCmd},
		"onboard":  {"write the config file and workspace templates", onboardCmd},
		"status":   {"show streams, consumers, workers and tool runners", statusCmd},
		"memory":   {"read the fleet's memory: show, history, search, revisions, restore, link, unlink, links", memoryCmd},
		"pairing":  {"approve a DM pairing code: pairing approve CODE", pairingCmd},
		"channels": {"channels status: each configured channel's state, account and gateway; channels login whatsapp: link by QR code", channelsCmd},
		"cron":     {"cron list, cron remove JOB_ID: the scheduled jobs with their next fire time", cronCmd},
		"profile":  {"profile seed: copy the workspace's reviewed bootstrap files and skills into the agent's profile", profileCmd},
	}
}

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := newEnvironment(os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	now := make(chan struct{})
	env.stopNow = now
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal stops gracefully. The second stops now: `run`
		// cancels its running turns and hands them back, to be taken
		// again at the next start; a command still running stopNowGrace
		// later is ended. A third gets the default handling and ends the
		// process at once.
		<-sigs
		cancel()
		<-sigs
		signal.Reset(os.Interrupt, syscall.SIGTERM)
		close(now)
		time.Sleep(stopNowGrace)
		os.Exit(130)
	}()
	os.Exit(exitCode(dispatch(ctx, env, os.Args[1:]), os.Stderr))
}

// stopNowGrace is how long a command may take to stop after the second
// signal: the running turns' handing back, the parts' stop.
const stopNowGrace = 10 * time.Second

// nanobotCommand says what to run instead of a command of nanobot's CLI
// that nanofleet names otherwise, for users who come with its habits.
func nanobotCommand(name string) string {
	switch name {
	case "gateway":
		return `nanobot's "gateway" is "nanofleet run" here (channels, agent and tools in one process)`
	}
	return ""
}

// errInterrupted: a command that waited was stopped by a signal.
var errInterrupted = errors.New("interrupted")

// errBenchMoved answers `nanofleet bench`: the bench is its own main so
// that the shipped binary does not carry it.
var errBenchMoved = errors.New("the bench is not part of the shipped binary: run `make bench`, or `go run ./cmd/bench` in services/nanofleet of a checkout")

// exitCode follows the flag package's convention: 0 when help was asked
// for, 2 for a command line that could not be used (what is wrong, then
// the usage), 1 for a failure.
func exitCode(err error, stderr io.Writer) int {
	var usage *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		if usage.msg != "" {
			fmt.Fprintln(stderr, "nanofleet:", usage.msg)
		}
		fmt.Fprint(stderr, usage.usage)
		return 2
	case errors.Is(err, errInterrupted):
		fmt.Fprintln(stderr, "nanofleet: interrupted")
		return 130 // the shell's code for a command ended by Ctrl-C
	default:
		fmt.Fprintln(stderr, "nanofleet:", err)
		return 1
	}
}

func dispatch(ctx context.Context, env *environment, args []string) error {
	cmds := commands()
	switch {
	case len(args) == 0:
		return &usageError{usage: usage(cmds)}
	case len(args) == 2 && args[0] == "help": // nanofleet help cron
		if _, ok := cmds[args[1]]; !ok {
			return unknownCommand(args[1], cmds)
		}
		return dispatch(ctx, env, []string{args[1], "--help"})
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(env.stdout, usage(cmds))
		return flag.ErrHelp
	case "bench":
		return errBenchMoved
	}
	c, ok := cmds[args[0]]
	if !ok {
		return unknownCommand(args[0], cmds)
	}
	return c.run(ctx, env, args[1:])
}

func unknownCommand(name string, cmds map[string]command) *usageError {
	msg := fmt.Sprintf("unknown command %q", name)
	if instead := nanobotCommand(name); instead != "" {
		msg += ": " + instead
	}
	return &usageError{msg: msg, usage: usage(cmds)}
}

// usage is nanofleet's usage: its commands.
func usage(cmds map[string]command) string {
	names := slices.Sorted(maps.Keys(cmds))
	var b strings.Builder
	fmt.Fprintln(&b, "usage: nanofleet <command> [arguments] [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-9s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(&b, "\nRun 'nanofleet <command> --help' (or 'nanofleet help <command>') for a command's usage and flags.")
	return b.String()
}
