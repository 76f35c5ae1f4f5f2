package consolidator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/forcedtool"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/jsonrepair"
)

// result is what the model made of a chunk of turns.
type result struct {
	// Entry is the history entry text.
	Entry string
	// Memory is the new MEMORY.md, or "" for unchanged.
	Memory string
	// Usage is what the model call cost, also when its answer was
	// unusable.
	Usage llm.Usage
}

const systemPrompt = "You are a memory consolidation agent. Call the save_memory tool with your consolidation of the conversation."

// saveMemory is the tool the model must call, as nanobot's consolidation
// does: its arguments are checked against a schema instead of parsed out
// of free text.
var saveMemory = toolschema.Tool{
	Name:        "save_memory",
	Description: "Save the memory consolidation result to persistent storage.",
	Parameters: toolschema.Object(map[string]any{
		"history_entry": map[string]any{
			"type":        "string",
			"minLength":   1,
			"description": historyEntryDescription,
		},
		"memory_update": map[string]any{
			"type":        "string",
			"description": "Full updated long-term memory as markdown. Include all existing facts plus new ones. Return unchanged if nothing new.",
		},
	}, "history_entry"),
}

var saveMemorySchema = toolschema.MustCompile(saveMemory.Parameters)

// consolidationPrompt is nanobot's consolidation prompt.
func consolidationPrompt(memory, conversation string) string {
	if strings.TrimSpace(memory) == "" {
		memory = "(empty)"
	}
	return `You are a memory consolidation agent. Process this conversation and call the save_memory tool with:

1. "history_entry": A paragraph (2-5 sentences) summarizing the key events/decisions/topics. Start with a timestamp like [YYYY-MM-DD HH:MM]. Include enough detail to be useful when found by grep search later.

2. "memory_update": The updated long-term memory content. Add any new facts: user location, preferences, personal info, habits, project context, technical decisions, tools/services used. If nothing new, return the existing content unchanged.

## Current Long-term Memory
` + memory + `

## Conversation to Process
` + conversation + ``
}

// summarise asks the model to condense conversation given the current
// memory, forcing a save_memory call. A model that answers in text anyway
// (some OpenAI-compatible servers ignore tool_choice) is read as the JSON
// object the prompt describes, repaired where it can be.
func summarise(ctx context.Context, model llm.Client, cfg Config, memory, conversation string) (result, error) {
	args, called, text, u, err := forceTool(ctx, model, cfg, saveMemory, systemPrompt, consolidationPrompt(memory, conversation))
	if err != nil {
		return result{}, err
	}
	var res result
	if called {
		res, err = parseCall(args)
	} else {
		res, err = parseAnswer(text)
	}
	res.Usage = u
	return res, err
}

// forceTool asks the model with the prompts, forcing a call of tool, and
// returns the call's arguments, or the text of a model that answered in
// text anyway, and the call's usage.
func forceTool(ctx context.Context, model llm.Client, cfg Config, tool toolschema.Tool, system, user string) (args string, called bool, text string, u llm.Usage, err error) {
	a, err := forcedtool.Ask(ctx, model, tool, llm.Request{
		Model: cfg.Model,
		Messages: []*nanofleetv1.ChatMessage{
			{Role: "system", Content: system},
			{Role: "user", Content: user},
		},
		Temperature: 0.1,
		MaxTokens:   cfg.MaxTokens,
	})
	if err != nil {
		return "", false, "", llm.Usage{}, fmt.Errorf("consolidation model: %w", err)
	}
	return a.Arguments, a.Called, a.Text, a.Usage, nil
}

// parseCall reads save_memory's arguments, checked by its schema.
func parseCall(arguments string) (result, error) {
	args, err := saveMemorySchema.Parse(arguments)
	if err != nil {
		return result{}, fmt.Errorf("%w: save_memory: %w", ErrBadAnswer, err)
	}
	var r struct {
		HistoryEntry string `json:"history_entry"`
		MemoryUpdate string `json:"memory_update"`
	}
	if err := toolschema.Decode(args, &r); err != nil {
		return result{}, fmt.Errorf("%w: save_memory: %w", ErrBadAnswer, err)
	}
	return newResult(r.HistoryEntry, r.MemoryUpdate)
}

// parseAnswer reads {"history_entry": …, "memory_update": …} from text,
// repairing what can be repaired.
func parseAnswer(text string) (result, error) {
	obj, err := jsonrepair.Object(text)
	if err != nil {
		return result{}, fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	return newResult(stringField(obj["history_entry"]), stringField(obj["memory_update"]))
}

// newResult checks a consolidation. A missing or empty history entry makes
// it unusable; an empty memory update leaves memory unchanged (an empty
// MEMORY.md from a model is more likely a slip than a wish).
func newResult(entry, memory string) (result, error) {
	if strings.TrimSpace(entry) == "" {
		return result{}, fmt.Errorf("%w: no history_entry", ErrBadAnswer)
	}
	return result{Entry: strings.TrimSpace(entry), Memory: strings.TrimSpace(memory)}, nil
}

// stringField accepts a string, or a list of strings joined by lines.
func stringField(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var parts []string
		for _, p := range x {
			if s, ok := p.(string); ok {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// batchResult is what the model made of several conversations.
type batchResult struct {
	// Entries are the history entries, one per conversation, in order.
	Entries []string
	// Memory is the new MEMORY.md, or "" for unchanged.
	Memory string
	// Usage is what the model call cost, also when its answer was
	// unusable.
	Usage llm.Usage
}

const batchSystemPrompt = "You are a memory consolidation agent. Call the save_memories tool with your consolidation of the conversations."

// historyEntryDescription is save_memory's description of an entry.
const historyEntryDescription = "A paragraph (2-5 sentences) summarizing key events/decisions/topics. Start with [YYYY-MM-DD HH:MM]. Include detail useful for grep search."

// saveMemories is save_memory for several conversations at once: an entry
// per labelled conversation and one memory update for them all.
var saveMemories = toolschema.Tool{
	Name:        "save_memories",
	Description: "Save the memory consolidation result of several conversations to persistent storage.",
	Parameters: toolschema.Object(map[string]any{
		"history_entries": map[string]any{
			"type":        "array",
			"minItems":    1,
			"description": "One history entry per conversation, in the order given.",
			"items": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"conversation": map[string]any{
						"type":        "string",
						"description": "The conversation's label, e.g. C1.",
					},
					"history_entry": map[string]any{
						"type":        "string",
						"minLength":   1,
						"description": historyEntryDescription + " Only about this conversation.",
					},
				},
				"required":             []string{"conversation", "history_entry"},
				"additionalProperties": false,
			},
		},
		"memory_update": map[string]any{
			"type":        "string",
			"description": "Full updated long-term memory as markdown. Include all existing facts plus new ones from every conversation. Return unchanged if nothing new.",
		},
	}, "history_entries"),
}

var saveMemoriesSchema = toolschema.MustCompile(saveMemories.Parameters)

// entryAnswerTokens is what one more history entry adds to a batched
// answer: a 2-5 sentence paragraph with its timestamp and label, with room
// to spare.
const entryAnswerTokens = 256

// label names the i-th conversation of a batch.
func label(i int) string { return fmt.Sprintf("C%d", i+1) }

// batchPrompt is consolidationPrompt for several conversations, each under
// its label.
func batchPrompt(memory string, conversations []string) string {
	if strings.TrimSpace(memory) == "" {
		memory = "(empty)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `You are a memory consolidation agent. Process these %d conversations, each under its label, and call the save_memories tool with:

1. "history_entries": one entry per conversation, in the order given, each {"conversation": its label, "history_entry": a paragraph (2-5 sentences) summarizing the key events/decisions/topics of that conversation alone}. Start each entry with a timestamp like [YYYY-MM-DD HH:MM]. Include enough detail to be useful when found by grep search later.

2. "memory_update": The updated long-term memory content, with what every conversation taught. Add any new facts: user location, preferences, personal info, habits, project context, technical decisions, tools/services used. If nothing new, return the existing content unchanged.

## Current Long-term Memory
%s

## Conversations to Process
`, len(conversations), memory)
	for i, c := range conversations {
		fmt.Fprintf(&b, "\n### Conversation %s\n%s\n", label(i), c)
	}
	return b.String()
}

// summariseBatch is summarise for several conversations, forcing a
// save_memories call; a text answer is read as its JSON object, repaired
// where it can be. An answer that lacks an entry for some conversation is
// unusable as a whole.
func summariseBatch(ctx context.Context, model llm.Client, cfg Config, memory string, conversations []string) (batchResult, error) {
	// The answer holds an entry per conversation besides the memory: the
	// budget of one call would cut a long memory off, and a cut answer
	// archives every conversation raw.
	cfg.MaxTokens += (len(conversations) - 1) * entryAnswerTokens
	args, called, text, u, err := forceTool(ctx, model, cfg, saveMemories, batchSystemPrompt, batchPrompt(memory, conversations))
	if err != nil {
		return batchResult{}, err
	}
	if !called {
		args, err = repairBatchAnswer(text)
	}
	var res batchResult
	if err == nil {
		res, err = parseBatchCall(args, len(conversations))
	}
	res.Usage = u
	return res, err
}

// repairBatchAnswer reads save_memories' arguments out of a text answer,
// repairing what can be repaired.
func repairBatchAnswer(text string) (string, error) {
	obj, err := jsonrepair.Object(text)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	repaired, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	return string(repaired), nil
}

// parseBatchCall reads save_memories' arguments, checked by its schema,
// for n conversations: each label must have exactly one non-empty entry.
func parseBatchCall(arguments string, n int) (batchResult, error) {
	args, err := saveMemoriesSchema.Parse(arguments)
	if err != nil {
		return batchResult{}, fmt.Errorf("%w: save_memories: %w", ErrBadAnswer, err)
	}
	var r struct {
		HistoryEntries []struct {
			Conversation string `json:"conversation"`
			HistoryEntry string `json:"history_entry"`
		} `json:"history_entries"`
		MemoryUpdate string `json:"memory_update"`
	}
	if err := toolschema.Decode(args, &r); err != nil {
		return batchResult{}, fmt.Errorf("%w: save_memories: %w", ErrBadAnswer, err)
	}
	byLabel := make(map[string]string, n)
	for _, e := range r.HistoryEntries {
		l := strings.TrimSpace(e.Conversation)
		if _, dup := byLabel[l]; dup {
			return batchResult{}, fmt.Errorf("%w: save_memories: two entries for %q", ErrBadAnswer, l)
		}
		byLabel[l] = strings.TrimSpace(e.HistoryEntry)
	}
	res := batchResult{Entries: make([]string, n), Memory: strings.TrimSpace(r.MemoryUpdate)}
	for i := range n {
		text, ok := byLabel[label(i)]
		if !ok || text == "" {
			return batchResult{}, fmt.Errorf("%w: save_memories: no history_entry for %s", ErrBadAnswer, label(i))
		}
		res.Entries[i] = text
	}
	if len(byLabel) != n {
		return batchResult{}, fmt.Errorf("%w: save_memories: %d entries for %d conversations", ErrBadAnswer, len(byLabel), n)
	}
	return res, nil
}
