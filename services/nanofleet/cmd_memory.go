package main

import (
	"context"
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
	var c common
	var agent, scopeName string
	var n int
	scopeFlags := func(fs *flag.FlagSet) {
		fs.StringVar(&agent, "agent", profile.DefaultAgent, "agent `id`")
		fs.StringVar(&scopeName, "scope", memory.KindAgent, "`scope`: agent, user:<person> or session:<channel>:<chat id>")
	}
	countFlags := func(fs *flag.FlagSet) {
		scopeFlags(fs)
		fs.IntVar(&n, "n", 20, "how many to list, the newest first")
	}
	// inScope runs run on the fleet with the scope the flags name.
	inScope := func(run func(b *bus.Bus, s memory.Scope) error) error {
		scope, err := memory.ParseScopeName(agent, scopeName)
		if err != nil {
			return &argError{err}
		}
		return env.withFleet(ctx, &c, func(b *bus.Bus) error { return run(b, scope) })
	}
	onFleet := func(run func(b *bus.Bus) error) error { return env.withFleet(ctx, &c, run) }
	out := env.stdout
	set := &commandSet{
		name:    "memory",
		summary: "Read the fleet's memory, restore a revision, and join a person's senders on several channels.",
		flags:   func(fs *flag.FlagSet) { env.registerClient(fs, &c) },
		note:    `A scope is "agent" (default), "user:<person>" or "session:<channel>:<chat id>".`,
		subs: []subcommand{
			{name: "show", synopsis: "[--scope S] [--agent A]", summary: "print the scope's MEMORY.md and recent entries", flags: scopeFlags,
				run: func([]string) error {
					return inScope(func(b *bus.Bus, s memory.Scope) error { return memoryShow(ctx, b, s, out) })
				}},
			{name: "history", synopsis: "[--scope S] [--agent A] [-n N]", summary: "list the newest N history entries (default 20)", flags: countFlags,
				run: func([]string) error {
					return inScope(func(b *bus.Bus, s memory.Scope) error { return memoryHistory(ctx, b, s, n, out) })
				}},
			{name: "search", synopsis: "[--scope S] [--agent A] [-n N] WORDS...", summary: "search the history entries, newest first", flags: countFlags,
				minArgs: 1, maxArgs: -1, argNames: "WORDS to search for",
				run: func(words []string) error {
					return inScope(func(b *bus.Bus, s memory.Scope) error {
						return memorySearch(ctx, b, s, strings.Join(words, " "), n, out)
					})
				}},
			{name: "revisions", synopsis: "[--scope S] [--agent A] [-n N]", summary: "list memory revisions (Dream, restores, the file sync)", flags: countFlags,
				run: func([]string) error {
					return inScope(func(b *bus.Bus, s memory.Scope) error { return memoryRevisions(ctx, b, s, n, out) })
				}},
			{name: "restore", synopsis: "REVISION", summary: "undo a revision", minArgs: 1, maxArgs: 1,
				run: func(args []string) error {
					seq, err := strconv.ParseUint(strings.TrimPrefix(args[0], "#"), 10, 64)
					if err != nil {
						return badArg("revision %q is not a number", args[0])
					}
					return onFleet(func(b *bus.Bus) error { return memoryRestore(ctx, b, seq, out) })
				}},
			{name: "link", synopsis: "CHANNEL:SENDER_ID PERSON", summary: "join a sender to a person (whose user scope it then reads)", minArgs: 2, maxArgs: 2,
				run: func(args []string) error {
					ch, id, err := parseSender(args[0])
					if err != nil {
						return err
					}
					return onFleet(func(b *bus.Bus) error { return memoryLink(ctx, b, ch, id, args[1], out) })
				}},
			{name: "unlink", synopsis: "CHANNEL:SENDER_ID", summary: "remove a sender's link", minArgs: 1, maxArgs: 1,
				run: func(args []string) error {
					ch, id, err := parseSender(args[0])
					if err != nil {
						return err
					}
					return onFleet(func(b *bus.Bus) error { return memoryUnlink(ctx, b, ch, id, out) })
				}},
			{name: "links", summary: "list the identity links",
				run: func([]string) error {
					return onFleet(func(b *bus.Bus) error { return memoryLinks(ctx, b, out) })
				}},
		},
	}
	return set.run(out, args)
}

// parseSender splits "telegram:12345".
func parseSender(s string) (channel, id string, err error) {
	channel, id, ok := strings.Cut(s, ":")
	if !ok || channel == "" || id == "" {
		return "", "", badArg("sender %q is not CHANNEL:SENDER_ID", s)
	}
	return channel, id, nil
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
	// From and to are sequences of the fleet's history stream, which holds
	// every session's turn records (and a command's): not turns of this
	// session.
	fmt.Fprintf(w, "#%d %s (history seq %d-%d)\n%s\n\n", e.Seq, e.GetSessionKey(), e.GetFromSeq(), e.GetToSeq(), memory.FormatEntry(e.HistoryEntry))
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

func memoryRestore(ctx context.Context, b *bus.Bus, seq uint64, w io.Writer) error {
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

func memoryLinks(ctx context.Context, b *bus.Bus, w io.Writer) error {
	l, err := memory.OpenLinks(ctx, b)
	if err != nil {
		return err
	}
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
}

func memoryLink(ctx context.Context, b *bus.Bus, channel, id, person string, w io.Writer) error {
	l, err := memory.OpenLinks(ctx, b)
	if err != nil {
		return err
	}
	if err := l.Link(ctx, channel, id, person); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s:%s is now %s.\n", channel, id, person)
	return nil
}

func memoryUnlink(ctx context.Context, b *bus.Bus, channel, id string, w io.Writer) error {
	l, err := memory.OpenLinks(ctx, b)
	if err != nil {
		return err
	}
	if err := l.Unlink(ctx, channel, id); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s:%s is no longer linked.\n", channel, id)
	return nil
}
