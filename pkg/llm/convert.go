package llm

import (
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// emptyToolContent replaces an empty tool result, which several hosts reject.
const emptyToolContent = "(empty)"

// convertMessages maps the conversation to go-openai messages.
func convertMessages(msgs []*nanofleetv1.ChatMessage) ([]openai.ChatCompletionMessage, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	out := make([]openai.ChatCompletionMessage, 0, len(msgs))
	for i, m := range msgs {
		if m == nil {
			return nil, fmt.Errorf("%w: message %d is nil", ErrInvalidRequest, i)
		}
		if m.GetRole() == "" {
			return nil, fmt.Errorf("%w: message %d has no role", ErrInvalidRequest, i)
		}
		om := openai.ChatCompletionMessage{
			Role:             m.GetRole(),
			Content:          m.GetContent(),
			Name:             m.GetName(),
			ToolCallID:       m.GetToolCallId(),
			ReasoningContent: m.GetReasoningContent(),
		}
		for _, tc := range m.GetToolCalls() {
			args := tc.GetArgumentsJson()
			if args == "" {
				args = "{}"
			}
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{
				ID:       tc.GetId(),
				Type:     openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.GetName(), Arguments: args},
			})
		}
		if om.Role == openai.ChatMessageRoleTool && om.Content == "" {
			om.Content = emptyToolContent
		}
		if om.Role == openai.ChatMessageRoleUser {
			if parts := imageParts(m.GetMedia()); len(parts) > 0 {
				if om.Content != "" {
					parts = slices.Insert(parts, 0, openai.ChatMessagePart{
						Type: openai.ChatMessagePartTypeText, Text: om.Content,
					})
				}
				om.Content, om.MultiContent = "", parts
			}
		}
		out = append(out, om)
	}
	return out, nil
}

// imageParts turns the images among media that have a URL (http(s) or data:)
// into image_url parts. Media held only in the Object Store must be turned
// into a data: URL by the caller first.
func imageParts(media []*nanofleetv1.MediaRef) []openai.ChatMessagePart {
	var parts []openai.ChatMessagePart
	for _, m := range media {
		u := m.GetUrl()
		if u == "" || !isImage(m.GetMimeType(), u) {
			continue
		}
		parts = append(parts, openai.ChatMessagePart{
			Type:     openai.ChatMessagePartTypeImageURL,
			ImageURL: &openai.ChatMessageImageURL{URL: u, Detail: openai.ImageURLDetailAuto},
		})
	}
	return parts
}

func isImage(mime, u string) bool {
	switch {
	case strings.HasPrefix(mime, "image/"):
		return true
	case strings.HasPrefix(u, "data:"):
		return strings.HasPrefix(u, "data:image/")
	case mime != "":
		return false
	}
	base, _, _ := strings.Cut(u, "?")
	switch strings.ToLower(path.Ext(base)) {
	case ".png", ".jpg", ".jpeg", ".gif", ".webp":
		return true
	}
	return false
}

// isReasoningModel matches the OpenAI reasoning families that go-openai
// validates: they take max_completion_tokens and no temperature.
func isReasoningModel(model string) bool {
	m := strings.ToLower(model)
	if _, after, ok := strings.Cut(m, "/"); ok {
		m = after
	}
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(m, p) {
			return true
		}
	}
	return false
}

// wireModel strips a leading "<provider>/" that only served to pick the
// provider ("openrouter/anthropic/claude-3" goes to OpenRouter as
// "anthropic/claude-3").
func wireModel(provider, model string) string {
	if after, ok := strings.CutPrefix(model, provider+"/"); ok && after != "" {
		return after
	}
	return model
}

// toolCallsFrom converts the function tool calls of a response message.
func toolCallsFrom(calls []openai.ToolCall) []*nanofleetv1.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]*nanofleetv1.ToolCall, 0, len(calls))
	for _, c := range calls {
		if c.Type != "" && c.Type != openai.ToolTypeFunction {
			continue
		}
		out = append(out, newToolCall(c.ID, c.Function.Name, c.Function.Arguments))
	}
	return out
}

func newToolCall(id, name, args string) *nanofleetv1.ToolCall {
	if id == "" {
		id = fmt.Sprintf("call_%016x", rand.Uint64())
	}
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	return &nanofleetv1.ToolCall{Id: id, Name: name, ArgumentsJson: args}
}
