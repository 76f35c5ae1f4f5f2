package llmtest

import (
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// Script decides the reply to a chat request. It may be called concurrently.
type Script func(req *RecordedRequest) Reply

// RecordedRequest is a decoded chat completion request. The embedded
// go-openai request gives Model, Messages, Tools, Stream, StreamOptions,
// Temperature, MaxTokens and the rest.
type RecordedRequest struct {
	openai.ChatCompletionRequest
	// Seq is the 1-based arrival order among chat requests.
	Seq int64
	// Header is the HTTP request header (Authorization included).
	Header http.Header
}

// LastMessage returns the last message, or a zero message if there is none.
func (r *RecordedRequest) LastMessage() openai.ChatCompletionMessage {
	if len(r.Messages) == 0 {
		return openai.ChatCompletionMessage{}
	}
	return r.Messages[len(r.Messages)-1]
}

// LastUserText returns the text of the last user message (text parts
// joined by newlines for multi-part content).
func (r *RecordedRequest) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == openai.ChatMessageRoleUser {
			return MessageText(m)
		}
	}
	return ""
}

// ToolNames returns the names of the tools offered, in request order.
func (r *RecordedRequest) ToolNames() []string {
	names := make([]string, 0, len(r.Tools))
	for _, t := range r.Tools {
		if t.Function != nil {
			names = append(names, t.Function.Name)
		}
	}
	return names
}

// MessageText returns a message's text: Content, or its text parts joined
// by newlines.
func MessageText(m openai.ChatCompletionMessage) string {
	if m.Content != "" || len(m.MultiContent) == 0 {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.MultiContent {
		if p.Type != openai.ChatMessagePartTypeText {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// Echo is the default Script: "echo: <last user text>", or
// "tool result: <content>" when the last message is a tool result.
func Echo(req *RecordedRequest) Reply {
	if last := req.LastMessage(); last.Role == openai.ChatMessageRoleTool {
		return Text("tool result: " + MessageText(last))
	}
	return Text("echo: " + req.LastUserText())
}
