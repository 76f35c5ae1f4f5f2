package consolidator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/llm"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/jsonrepair"
)

// ErrBadAnswer means the model's answer could not be used.
var ErrBadAnswer = errors.New("consolidator: unusable model answer")

// result is what the model made of a chunk of turns.
type result struct {
	// Entry is the history entry text.
	Entry string
	// Memory is the new MEMORY.md, or "" for unchanged.
	Memory string
}

const systemPrompt = "You are a memory consolidation agent. Respond only with valid JSON."

// consolidationPrompt is nanobot's consolidation prompt.
func consolidationPrompt(memory, conversation string) string {
	if strings.TrimSpace(memory) == "" {
		memory = "(empty)"
	}
	return `You are a memory consolidation agent. Process this conversation and return a JSON object with exactly two keys:

1. "history_entry": A paragraph (2-5 sentences) summarizing the key events/decisions/topics. Start with a timestamp like [YYYY-MM-DD HH:MM]. Include enough detail to be useful when found by grep search later.

2. "memory_update": The updated long-term memory content. Add any new facts: user location, preferences, personal info, habits, project context, technical decisions, tools/services used. If nothing new, return the existing content unchanged.

## Current Long-term Memory
` + memory + `

## Conversation to Process
` + conversation + `

Respond with ONLY valid JSON, no markdown fences.`
}

// summarise asks the model to condense conversation given the current
// memory.
func summarise(ctx context.Context, model llm.Client, cfg Config, memory, conversation string) (result, error) {
	resp, err := model.Chat(ctx, llm.Request{
		Model: cfg.Model,
		Messages: []*nanofleetv1.ChatMessage{
			{Role: "system", Content: systemPrompt},
			{Role: "user", Content: consolidationPrompt(memory, conversation)},
		},
		Temperature: 0.1,
		MaxTokens:   cfg.MaxTokens,
	})
	if err != nil {
		return result{}, fmt.Errorf("consolidation model: %w", err)
	}
	return parseAnswer(resp.Content)
}

// parseAnswer reads {"history_entry": …, "memory_update": …}, repairing
// what can be repaired. A missing or empty history entry makes the answer
// unusable; a missing or empty memory update leaves memory unchanged (an
// empty MEMORY.md from a model is more likely a slip than a wish).
func parseAnswer(text string) (result, error) {
	obj, err := jsonrepair.Object(text)
	if err != nil {
		return result{}, fmt.Errorf("%w: %v", ErrBadAnswer, err)
	}
	entry := stringField(obj["history_entry"])
	if strings.TrimSpace(entry) == "" {
		return result{}, fmt.Errorf("%w: no history_entry", ErrBadAnswer)
	}
	return result{Entry: strings.TrimSpace(entry), Memory: strings.TrimSpace(stringField(obj["memory_update"]))}, nil
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
