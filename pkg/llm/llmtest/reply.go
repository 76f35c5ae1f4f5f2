package llmtest

import (
	"net/http"
	"time"
)

// Reply is what the server answers to one chat request. The zero Reply is
// an empty assistant message.
type Reply struct {
	// Content is the assistant text.
	Content string
	// ReasoningContent is sent as reasoning_content (DeepSeek style).
	ReasoningContent string
	// ToolCalls the assistant makes. A call without ID gets
	// "call_<request seq>_<index>".
	ToolCalls []ToolCall
	// FinishReason defaults to "tool_calls" when there are tool calls and
	// "stop" otherwise.
	FinishReason string
	// Model overrides the model reported back (default: the request's).
	Model string
	// PromptTokens and CompletionTokens override the usage reported (by
	// default a rough estimate of four bytes per token).
	PromptTokens, CompletionTokens int
	// CachedTokens and ReasoningTokens, when set, are reported in the
	// usage's prompt_tokens_details and completion_tokens_details.
	CachedTokens, ReasoningTokens int

	// Status, when neither 0 nor 200, makes the reply an OpenAI-style
	// error with this HTTP status.
	Status int
	// RetryAfter is sent as the Retry-After header of an error reply.
	RetryAfter string
	// Message is the error message of an error reply.
	Message string

	// Latency delays the reply (before any byte is written). It replaces
	// the server-wide WithLatency when not zero.
	Latency time.Duration
	// ChunkDelay paces a streamed reply: the wait between chunks, each of
	// which is flushed.
	ChunkDelay time.Duration
}

// ToolCall is one function call of a Reply.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON object text
}

// Text replies with content.
func Text(content string) Reply { return Reply{Content: content} }

// ToolCalls replies with tool calls and no content.
func ToolCalls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Call is a tool call for ToolCalls; the server assigns its id.
func Call(name, argumentsJSON string) ToolCall {
	return ToolCall{Name: name, Arguments: argumentsJSON}
}

// Fail replies with an HTTP error. retryAfter, when not empty, is sent as
// the Retry-After header ("0", "2", or an HTTP date).
func Fail(status int, retryAfter string) Reply {
	return Reply{Status: status, RetryAfter: retryAfter, Message: "llmtest: " + http.StatusText(status)}
}

// WithContent returns r with content (e.g. text alongside tool calls).
func (r Reply) WithContent(content string) Reply { r.Content = content; return r }

// WithReasoning returns r with reasoning content.
func (r Reply) WithReasoning(reasoning string) Reply { r.ReasoningContent = reasoning; return r }

// WithLatency returns r delayed by d.
func (r Reply) WithLatency(d time.Duration) Reply { r.Latency = d; return r }

// WithChunkDelay returns r streamed with d between chunks.
func (r Reply) WithChunkDelay(d time.Duration) Reply { r.ChunkDelay = d; return r }

// WithUsage returns r reporting these token counts.
func (r Reply) WithUsage(prompt, completion int) Reply {
	r.PromptTokens, r.CompletionTokens = prompt, completion
	return r
}

// WithTokenDetails returns r reporting these cached prompt tokens and
// reasoning tokens.
func (r Reply) WithTokenDetails(cached, reasoning int) Reply {
	r.CachedTokens, r.ReasoningTokens = cached, reasoning
	return r
}

// WithFinishReason returns r with finish reason reason (e.g. "length").
func (r Reply) WithFinishReason(reason string) Reply { r.FinishReason = reason; return r }

func (r *Reply) failed() bool { return r.Status != 0 && r.Status != http.StatusOK }

func (r *Reply) finishReason() string {
	switch {
	case r.FinishReason != "":
		return r.FinishReason
	case len(r.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}
