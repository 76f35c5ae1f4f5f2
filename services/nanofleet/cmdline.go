package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// The command line every command shares. Flags may come before, among
// and after the other arguments, and before or after a subcommand's name
// ("--" ends them). -h, --help, or "help" where no argument is expected,
// print the help on stdout and exit 0. A command line that cannot be used
// prints what is wrong and the usage on stderr and exits 2.

// cmd is a command line: a command without subcommands ("status"), or
// one subcommand of a [commandSet] ("cron remove").
type cmd struct {
	// name is as typed after "nanofleet": "status", "cron remove".
	name string
	// synopsis follows the name in the usage line: the arguments and the
	// flags worth naming there ("[--session KEY] JOB_ID").
	synopsis string
	// summary is a sentence for the help.
	summary string
	// flags adds every flag the command takes; nil for none.
	flags func(fs *flag.FlagSet)
	// minArgs and maxArgs bound the arguments that are not flags;
	// maxArgs < 0 is no bound.
	minArgs, maxArgs int
	// argNames names the arguments for an error about their number
	// ("JOB_ID"); empty: synopsis.
	argNames string
}

// usageLine is c's usage line after "usage: ": the flags it does not
// name are "[flags]".
func (c *cmd) usageLine() string {
	line := strings.TrimSpace("nanofleet " + c.name + " " + c.synopsis)
	if hasFlags(c.flagSet()) {
		line += " [flags]"
	}
	return line
}

// usage is what a command line refused by c prints after the error.
func (c *cmd) usage() string {
	return fmt.Sprintf("usage: %s\nRun 'nanofleet %s --help' for its flags.\n", c.usageLine(), c.name)
}

func (c *cmd) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	// The parse's errors are returned and printed once, by exitCode.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if c.flags != nil {
		c.flags(fs)
	}
	return fs
}

// parse parses args for c: flags anywhere, then the count of the other
// arguments, which it returns. Help asked for is printed on out and
// returned as flag.ErrHelp.
func (c *cmd) parse(out io.Writer, args []string) ([]string, error) {
	fs := c.flagSet()
	if c.maxArgs == 0 && len(args) == 1 && args[0] == "help" {
		c.help(out, fs)
		return nil, flag.ErrHelp
	}
	rest, err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.help(out, fs)
		return nil, flag.ErrHelp
	case err != nil:
		return nil, &usageError{msg: c.name + ": " + err.Error(), usage: c.usage(), err: err}
	}
	if err := c.checkArgs(rest); err != nil {
		return nil, err
	}
	return rest, nil
}

// checkArgs refuses a count of arguments c does not take.
func (c *cmd) checkArgs(rest []string) error {
	if len(rest) >= c.minArgs && (c.maxArgs < 0 || len(rest) <= c.maxArgs) {
		return nil
	}
	var msg string
	switch {
	case c.maxArgs == 0:
		msg = fmt.Sprintf("%s: unexpected arguments %s", c.name, quoteAll(rest))
	case len(rest) > c.maxArgs:
		msg = fmt.Sprintf("%s: unexpected arguments %s after %s", c.name, quoteAll(rest[c.maxArgs:]), quoteAll(rest[:c.maxArgs]))
	default:
		msg = fmt.Sprintf("%s: want %s", c.name, cmp.Or(c.argNames, c.synopsis))
	}
	return &usageError{msg: msg, usage: c.usage()}
}

func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, " ")
}

// help prints c's usage, summary and flags.
func (c *cmd) help(out io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(out, "usage: %s\n\n%s\n", c.usageLine(), c.summary)
	if hasFlags(fs) {
		fmt.Fprintln(out, "\nflags (before or after the arguments):")
		printFlags(out, fs)
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

func printFlags(out io.Writer, fs *flag.FlagSet) {
	fs.SetOutput(out)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parseInterspersed parses args with fs, taking flags anywhere among the
// other arguments until a "--", and returns the other arguments in order.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			return rest, nil
		}
		if used := len(args) - len(left); used > 0 && args[used-1] == "--" {
			return append(rest, left...), nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// subcommand is one subcommand of a [commandSet].
type subcommand struct {
	// name is the subcommand's own ("list"); synopsis, summary, minArgs,
	// maxArgs and argNames are as in [cmd].
	name, synopsis, summary string
	minArgs, maxArgs        int
	argNames                string
	// flags adds the subcommand's own flags; nil for none.
	flags func(fs *flag.FlagSet)
	// run runs it with the arguments that are not flags. An [argError]
	// it returns is refused as a usage error.
	run func(args []string) error
}

// commandSet is a command made of subcommands ("cron list", "cron
// remove"). The set's flags and the subcommand's are taken before or
// after the subcommand's name: `cron --session K list` is `cron list
// --session K`.
type commandSet struct {
	name, summary string
	// flags adds the flags every subcommand takes.
	flags func(fs *flag.FlagSet)
	subs  []subcommand
	// note ends the set's help (what a scope is).
	note string
}

// cmd is the command line of sub.
func (s *commandSet) cmd(sub *subcommand) *cmd {
	return &cmd{
		name: s.name + " " + sub.name, synopsis: sub.synopsis, summary: sub.summary,
		minArgs: sub.minArgs, maxArgs: sub.maxArgs, argNames: sub.argNames,
		flags: func(fs *flag.FlagSet) {
			if s.flags != nil {
				s.flags(fs)
			}
			if sub.flags != nil {
				sub.flags(fs)
			}
		},
	}
}

func (s *commandSet) find(name string) *subcommand {
	for i := range s.subs {
		if s.subs[i].name == name {
			return &s.subs[i]
		}
	}
	return nil
}

// allFlags is a flag set with the set's flags and every subcommand's,
// each once: what may come before the subcommand's name.
func (s *commandSet) allFlags() *flag.FlagSet {
	fs := (&cmd{name: s.name, flags: s.flags}).flagSet()
	for _, sub := range s.subs {
		if sub.flags == nil {
			continue
		}
		own := flag.NewFlagSet(sub.name, flag.ContinueOnError)
		sub.flags(own)
		own.VisitAll(func(f *flag.Flag) {
			if fs.Lookup(f.Name) == nil {
				fs.Var(f.Value, f.Name, f.Usage)
			}
		})
	}
	return fs
}

// usageLines lists the subcommands' usage lines.
func (s *commandSet) usageLines() string {
	var b strings.Builder
	for i := range s.subs {
		lead := "usage: "
		if i > 0 {
			lead = "       "
		}
		fmt.Fprintf(&b, "%s%s\n", lead, s.cmd(&s.subs[i]).usageLine())
	}
	return b.String()
}

// usage is what a command line refused by the set prints after the error.
func (s *commandSet) usage() string {
	return s.usageLines() + fmt.Sprintf("Run 'nanofleet %s --help' for more.\n", s.name)
}

// help prints the set's usage, its subcommands one a line and every flag.
func (s *commandSet) help(out io.Writer) {
	fmt.Fprintf(out, "%s\n%s\n\ncommands:\n", s.usageLines(), s.summary)
	width := 0
	for _, sub := range s.subs {
		width = max(width, len(sub.name))
	}
	for _, sub := range s.subs {
		fmt.Fprintf(out, "  %-*s  %s\n", width, sub.name, sub.summary)
	}
	if fs := s.allFlags(); hasFlags(fs) {
		fmt.Fprintln(out, "\nflags (before or after the command):")
		printFlags(out, fs)
	}
	if s.note != "" {
		fmt.Fprintf(out, "\n%s\n", s.note)
	}
	fmt.Fprintf(out, "\nRun 'nanofleet %s <command> --help' for a command's own flags.\n", s.name)
}

// run finds the subcommand named in args, parses the rest for it and
// runs it. Help goes to out.
func (s *commandSet) run(out io.Writer, args []string) error {
	// The name is the first argument that is not a flag or a flag's
	// value; every flag of the set may come before it.
	all := s.allFlags()
	err := all.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		s.help(out)
		return flag.ErrHelp
	case err != nil:
		return &usageError{msg: s.name + ": " + err.Error(), usage: s.usage(), err: err}
	case all.NArg() == 0:
		return &usageError{usage: s.usage()}
	}
	i := len(args) - all.NArg()
	name, rest := args[i], append(args[:i:i], args[i+1:]...)
	if name == "help" {
		if len(all.Args()) == 2 {
			if sub := s.find(all.Arg(1)); sub != nil {
				c := s.cmd(sub)
				c.help(out, c.flagSet())
				return flag.ErrHelp
			}
		}
		s.help(out)
		return flag.ErrHelp
	}
	sub := s.find(name)
	if sub == nil {
		return &usageError{msg: fmt.Sprintf("%s: unknown command %q", s.name, name), usage: s.usage()}
	}
	c := s.cmd(sub)
	vals, err := c.parse(out, rest)
	if err != nil {
		return err
	}
	err = sub.run(vals)
	var bad *argError
	if errors.As(err, &bad) {
		return &usageError{msg: c.name + ": " + bad.Error(), usage: c.usage(), err: bad.err}
	}
	return err
}

// logLevel is the -log-level flag: one of slog's levels by name.
type logLevel struct{ level *slog.Level }

func (l logLevel) String() string {
	if l.level == nil {
		return ""
	}
	return strings.ToLower(l.level.String())
}

func (l logLevel) Set(s string) error {
	switch strings.ToLower(s) {
	case "debug", "info", "warn", "error":
		return l.level.UnmarshalText([]byte(s))
	}
	return errors.New("want debug, info, warn or error")
}
