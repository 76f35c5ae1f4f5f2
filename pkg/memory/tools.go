package memory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/slashcmd"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
)

// SearchTool is the memory_search tool: the model searches the older
// history entries of its turn's scope.
type SearchTool struct{ s *Store }

var _ agenttool.Tool = SearchTool{}

// Tool describes memory_search.
func (SearchTool) Tool() toolschema.Tool {
	return toolschema.Tool{
		Name: "memory_search",
		Description: "Search the history log of past conversations (summaries of older turns) for words or a phrase. " +
			"Use it when the user refers to something from an earlier conversation that is not in the current context or long-term memory. Newest matches first.",
		Parameters: toolschema.Object(map[string]any{
			"query": map[string]any{"type": "string", "minLength": 1, "description": "Words to look for (all must appear; case-insensitive)"},
			"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": 50, "description": "Most entries to return (default 5)"},
		}, "query"),
		ReadOnly: true,
	}
}

// Call searches.
func (t SearchTool) Call(ctx context.Context, tc *agenttool.TurnContext, args map[string]any) (string, error) {
	if tc == nil {
		return "", errNoTurn
	}
	query, _ := args["query"].(string)
	limit := 5
	switch v := args["limit"].(type) {
	case int64:
		limit = int(v)
	case float64:
		limit = int(v)
	case int:
		limit = v
	}
	limit = min(max(limit, 1), 50)
	hits, err := t.s.Search(ctx, tc.Inbound, tc.SessionKey, query, limit)
	if err != nil {
		return "", err
	}
	if len(hits) == 0 {
		return "No history entries match " + strconv.Quote(query) + ".", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d history entries, newest first:\n", len(hits))
	for _, h := range hits {
		b.WriteString("\n- " + strings.ReplaceAll(FormatEntry(h.HistoryEntry), "\n", "\n  "))
	}
	return b.String(), nil
}

// DreamLogCommand is /dream-log [n]: what Dream (and restores and the
// workspace sync) changed in the caller's memory, newest first.
type DreamLogCommand struct{ s *Store }

var _ agenttool.Command = DreamLogCommand{}

// Describe is /dream-log's entry in /help and command menus.
func (DreamLogCommand) Describe() slashcmd.Command { return slashcmd.DreamLog() }

// Run lists the revisions.
func (c DreamLogCommand) Run(ctx context.Context, tc *agenttool.TurnContext, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.s.callTimeout)
	defer cancel()
	if tc == nil {
		return "", errNoTurn
	}
	n := 10
	if len(args) > 0 {
		v, err := strconv.Atoi(args[0])
		if err != nil || v < 1 || v > 100 {
			return "Usage: /dream-log [n] (n from 1 to 100)", nil
		}
		n = v
	}
	sc, err := c.s.Scope(ctx, tc.Inbound, tc.SessionKey)
	if err != nil {
		return "", err
	}
	revs, err := c.s.revs.List(ctx, []Scope{sc}, n)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if job, err := DescribeJob(ctx, c.s.b.JS, NamesOf(c.s.b.Space), "dream", c.s.cfg.Agent); err == nil {
		b.WriteString(job + "\n\n")
	}
	if len(revs) == 0 {
		b.WriteString("No memory revisions yet.")
		return b.String(), nil
	}
	for i, r := range revs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(FormatRevision(r))
	}
	b.WriteString("\n\nUndo one with /dream-restore <number>.")
	return b.String(), nil
}

// DreamRestoreCommand is /dream-restore <rev>: the files a revision
// changed get their earlier content back.
type DreamRestoreCommand struct{ s *Store }

var _ agenttool.Command = DreamRestoreCommand{}

// Describe is /dream-restore's entry in /help and command menus.
func (DreamRestoreCommand) Describe() slashcmd.Command { return slashcmd.DreamRestore() }

// Run restores.
func (c DreamRestoreCommand) Run(ctx context.Context, tc *agenttool.TurnContext, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.s.callTimeout)
	defer cancel()
	if tc == nil {
		return "", errNoTurn
	}
	if len(args) != 1 {
		return "Usage: /dream-restore <number> (see /dream-log)", nil
	}
	seq, err := strconv.ParseUint(strings.TrimPrefix(args[0], "#"), 10, 64)
	if err != nil || seq == 0 {
		return "Usage: /dream-restore <number> (see /dream-log)", nil
	}
	sc, err := c.s.Scope(ctx, tc.Inbound, tc.SessionKey)
	if err != nil {
		return "", err
	}
	rev, err := c.s.revs.Restore(ctx, seq, func(s Scope) bool { return s == sc })
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrForbidden):
		return fmt.Sprintf("There is no revision #%d in your memory (see /dream-log).", seq), nil
	case err != nil:
		return "", err
	}
	if len(rev.GetChanges()) == 0 {
		return fmt.Sprintf("Nothing to restore: the files revision #%d changed already have their earlier content.", seq), nil
	}
	var names []string
	for _, ch := range rev.GetChanges() {
		names = append(names, ch.GetName())
	}
	return fmt.Sprintf("Restored %s to their state before revision #%d. This restore is revision #%d; /dream-restore %d undoes it.",
		strings.Join(names, ", "), seq, rev.Seq, rev.Seq), nil
}
