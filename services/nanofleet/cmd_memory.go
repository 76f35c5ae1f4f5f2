package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/profile"
)

func memoryCmd(ctx context.Context, env *environment, args []string) error {
	return env.joinFleet(ctx, flag.NewFlagSet("memory", flag.ContinueOnError), args, nil, func(b *bus.Bus, _ *common, rest []string) error {
		return runMemory(ctx, b, rest, env.stdout)
	})
}

// errMemoryUsage means the memory command's arguments were wrong; the
// usage was printed. Its text names the package the command lived in
// before (pkg/memory/memcli), kept so the output is unchanged.
var errMemoryUsage = errors.New("memcli: usage")

// memoryUsage is the memory command's help text.
const memoryUsage = `Usage: nanofleet memory <command> [flags]

Commands:
  show      [--scope S] [--agent A]            print the scope's MEMORY.md and recent entries
  history   [--scope S] [--agent A] [-n N]     list the newest N history entries (default 20)
  search    [--scope S] [--agent A] [-n N] <words...>
                                               search the history log, newest first
  revisions [--scope S] [--agent A] [-n N]     list memory revisions (Dream, restores, sync)
  restore   <revision>                         undo a revision
  link      <channel>:<sender id> <person>     join a sender to a person (user scope)
  unlink    <channel>:<sender id>              remove a sender's link
  links                                        list identity links

A scope is "agent" (default), "user:<person>" or "session:<channel>:<chat id>".`

// runMemory is the operator's view of the fleet's memory, `nanofleet
// memory …`: show a scope's MEMORY.md, list or search its history log,
// list and restore revisions, and manage identity links. args excludes
// "memory". The layout and memory.Provision must have run.
func runMemory(ctx context.Context, b *bus.Bus, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stdout, memoryUsage)
		return errMemoryUsage
	}
	cmd, rest := args[0], args[1:]
	fs := flag.NewFlagSet("memory "+cmd, flag.ContinueOnError)
	fs.SetOutput(stdout)
	agent := fs.String("agent", profile.DefaultAgent, "agent id")
	scopeName := fs.String("scope", memory.KindAgent, "scope: agent, user:<person> or session:<key>")
	n := fs.Int("n", 20, "how many")
	if err := fs.Parse(rest); err != nil {
		return fmt.Errorf("%w: %v", errMemoryUsage, err)
	}
	scope, err := memory.ParseScopeName(*agent, *scopeName)
	if err != nil && cmd != "link" && cmd != "unlink" && cmd != "links" && cmd != "restore" {
		return err
	}
	switch cmd {
	case "show":
		return memoryShow(ctx, b, scope, stdout)
	case "history":
		return memoryHistory(ctx, b, scope, *n, stdout)
	case "search":
		if fs.NArg() == 0 {
			fmt.Fprintln(stdout, memoryUsage)
			return errMemoryUsage
		}
		return memorySearch(ctx, b, scope, strings.Join(fs.Args(), " "), *n, stdout)
	case "revisions":
		return memoryRevisions(ctx, b, scope, *n, stdout)
	case "restore":
		return memoryRestore(ctx, b, fs.Args(), stdout)
	case "link", "unlink", "links":
		return memoryLinks(ctx, b, cmd, fs.Args(), stdout)
	}
	fmt.Fprintln(stdout, memoryUsage)
	return fmt.Errorf("%w: unknown command %q", errMemoryUsage, cmd)
}

func memoryShow(ctx context.Context, b *bus.Bus, s memory.Scope, w io.Writer) error {
	docs, err := memory.OpenDocs(ctx, b)
	if err != nil {
		return err
	}
	doc, rev, err := docs.Get(ctx, s)
	if err != nil {
		return err
	}
	if rev == 0 {
		fmt.Fprintf(w, "No memory for %s yet.\n", s)
		return nil
	}
	// Its update count, not a revision: `memory revisions` lists the
	// changes Dream, restores and workspace edits made, which can be
	// restored; consolidation's are in `memory history`.
	fmt.Fprintf(w, "# Memory of %s (update %d, by %s, %s)\n\n", s, rev, doc.GetUpdatedBy(),
		doc.GetUpdatedAt().AsTime().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintln(w, memory.RenderContext(doc, 1<<30))
	return nil
}

func memoryHistory(ctx context.Context, b *bus.Bus, s memory.Scope, n int, w io.Writer) error {
	all, err := memory.OpenLog(b).Scope(ctx, s, 0, 0)
	if err != nil {
		return err
	}
	if len(all) == 0 {
		fmt.Fprintf(w, "No history entries for %s.\n", s)
		return nil
	}
	if n > 0 && len(all) > n {
		all = all[len(all)-n:]
	}
	for _, e := range all {
		printHistoryEntry(w, e)
	}
	return nil
}

func memorySearch(ctx context.Context, b *bus.Bus, s memory.Scope, query string, n int, w io.Writer) error {
	hits, err := memory.OpenLog(b).Search(ctx, s, query, n, 0)
	if err != nil {
		return err
	}
	if len(hits) == 0 {
		fmt.Fprintf(w, "No history entries of %s match %q.\n", s, query)
		return nil
	}
	for _, e := range hits {
		printHistoryEntry(w, e)
	}
	return nil
}

func printHistoryEntry(w io.Writer, e memory.Entry) {
	fmt.Fprintf(w, "#%d %s turns %d-%d\n%s\n\n", e.Seq, e.GetSessionKey(), e.GetFromSeq(), e.GetToSeq(), memory.FormatEntry(e.HistoryEntry))
}

func memoryRevisions(ctx context.Context, b *bus.Bus, s memory.Scope, n int, w io.Writer) error {
	revs, err := memory.OpenRevisions(ctx, b)
	if err != nil {
		return err
	}
	list, err := revs.List(ctx, []memory.Scope{s}, n)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintf(w, "No revisions for %s: revisions are the changes Dream, restores and workspace edits made; what consolidation wrote is in `memory history`.\n", s)
		return nil
	}
	for _, r := range list {
		fmt.Fprintln(w, memory.FormatRevision(r))
		fmt.Fprintln(w)
	}
	return nil
}

func memoryRestore(ctx context.Context, b *bus.Bus, args []string, w io.Writer) error {
	if len(args) != 1 {
		fmt.Fprintln(w, memoryUsage)
		return errMemoryUsage
	}
	seq, err := strconv.ParseUint(strings.TrimPrefix(args[0], "#"), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: revision %q is not a number", errMemoryUsage, args[0])
	}
	revs, err := memory.OpenRevisions(ctx, b)
	if err != nil {
		return err
	}
	r, err := revs.Restore(ctx, seq, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, memory.FormatRevision(*r))
	return nil
}

func memoryLinks(ctx context.Context, b *bus.Bus, cmd string, args []string, w io.Writer) error {
	l, err := memory.OpenLinks(ctx, b)
	if err != nil {
		return err
	}
	sender := func(s string) (string, string, error) {
		ch, id, ok := strings.Cut(s, ":")
		if !ok || ch == "" || id == "" {
			return "", "", fmt.Errorf("%w: sender %q is not <channel>:<sender id>", errMemoryUsage, s)
		}
		return ch, id, nil
	}
	switch {
	case cmd == "links":
		all, err := l.List(ctx)
		if err != nil {
			return err
		}
		if len(all) == 0 {
			fmt.Fprintln(w, "No identity links.")
		}
		for _, k := range all {
			fmt.Fprintf(w, "%s:%s → %s\n", k.Channel, k.SenderID, k.Person)
		}
		return nil
	case cmd == "link" && len(args) == 2:
		ch, id, err := sender(args[0])
		if err != nil {
			return err
		}
		if err := l.Link(ctx, ch, id, args[1]); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s:%s is now %s.\n", ch, id, args[1])
		return nil
	case cmd == "unlink" && len(args) == 1:
		ch, id, err := sender(args[0])
		if err != nil {
			return err
		}
		if err := l.Unlink(ctx, ch, id); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s:%s is no longer linked.\n", ch, id)
		return nil
	}
	fmt.Fprintln(w, memoryUsage)
	return errMemoryUsage
}
