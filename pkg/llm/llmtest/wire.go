package llmtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The types below reproduce OpenAI's wire format, field order included.

type completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	Choices           []completionChoice `json:"choices"`
	Usage             usage              `json:"usage"`
	SystemFingerprint *string            `json:"system_fingerprint"`
}

type completionChoice struct {
	Index        int             `json:"index"`
	Message      responseMessage `json:"message"`
	Logprobs     *struct{}       `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type responseMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	Refusal          *string        `json:"refusal"`
	ToolCalls        []toolCallWire `json:"tool_calls,omitempty"`
}

type toolCallWire struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function functionWire `json:"function"`
}

type functionWire struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type usage struct {
	PromptTokens            int                `json:"prompt_tokens"`
	CompletionTokens        int                `json:"completion_tokens"`
	TotalTokens             int                `json:"total_tokens"`
	PromptTokensDetails     *promptDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *completionDetails `json:"completion_tokens_details,omitempty"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type completionDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

type chunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint *string         `json:"system_fingerprint"`
	Choices           []chunkChoice   `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type delta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallWire `json:"tool_calls,omitempty"`
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelWire `json:"data"`
}

type modelWire struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, r *Reply) {
	typ, code := "invalid_request_error", ""
	switch {
	case r.Status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case r.Status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case r.Status == http.StatusNotFound:
		code = "not_found"
	case r.Status >= 500:
		typ = "server_error"
	}
	body := errorBody{Error: errorDetail{Message: r.Message, Type: typ}}
	if code != "" {
		body.Error.Code = &code
	}
	if body.Error.Message == "" {
		body.Error.Message = "llmtest: " + http.StatusText(r.Status)
	}
	if r.RetryAfter != "" {
		w.Header().Set("Retry-After", r.RetryAfter)
	}
	writeJSON(w, r.Status, body)
}

func writeModels(w http.ResponseWriter, ids []string) {
	list := modelList{Object: "list", Data: make([]modelWire, 0, len(ids))}
	for _, id := range ids {
		list.Data = append(list.Data, modelWire{ID: id, Object: "model", Created: 1700000000, OwnedBy: "llmtest"})
	}
	writeJSON(w, http.StatusOK, list)
}

func completionID(seq int64) string { return "chatcmpl-llmtest-" + strconv.FormatInt(seq, 10) }

func callID(seq int64, i int, c *ToolCall) string {
	if c.ID != "" {
		return c.ID
	}
	return "call_" + strconv.FormatInt(seq, 10) + "_" + strconv.Itoa(i)
}

func modelOf(req *RecordedRequest, r *Reply) string {
	if r.Model != "" {
		return r.Model
	}
	return req.Model
}

func usageOf(req *RecordedRequest, r *Reply) usage {
	u := usage{PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens}
	if r.CachedTokens > 0 {
		u.PromptTokensDetails = &promptDetails{CachedTokens: r.CachedTokens}
	}
	if r.ReasoningTokens > 0 {
		u.CompletionTokensDetails = &completionDetails{ReasoningTokens: r.ReasoningTokens}
	}
	if u.PromptTokens == 0 {
		n := 0
		for i := range req.Messages {
			n += len(MessageText(req.Messages[i]))
		}
		u.PromptTokens = n/4 + 1
	}
	if u.CompletionTokens == 0 {
		n := len(r.Content) + len(r.ReasoningContent)
		for _, c := range r.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
		u.CompletionTokens = n/4 + 1
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

func writeCompletion(w http.ResponseWriter, req *RecordedRequest, r *Reply) {
	msg := responseMessage{Role: "assistant", ReasoningContent: r.ReasoningContent}
	if r.Content != "" || len(r.ToolCalls) == 0 {
		msg.Content = &r.Content
	}
	for i := range r.ToolCalls {
		c := &r.ToolCalls[i]
		msg.ToolCalls = append(msg.ToolCalls, toolCallWire{
			ID:       callID(req.Seq, i, c),
			Type:     "function",
			Function: functionWire{Name: c.Name, Arguments: c.Arguments},
		})
	}
	writeJSON(w, http.StatusOK, completion{
		ID:      completionID(req.Seq),
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   modelOf(req, r),
		Choices: []completionChoice{{Message: msg, FinishReason: r.finishReason()}},
		Usage:   usageOf(req, r),
	})
}

// streamWriter writes OpenAI chat.completion.chunk events.
type streamWriter struct {
	w         http.ResponseWriter
	flusher   http.Flusher
	base      chunk
	withUsage bool
	delay     time.Duration
	wait      func(time.Duration) bool
	ok        bool
}

func (s *Server) writeStream(w http.ResponseWriter, hr *http.Request, req *RecordedRequest, r *Reply) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{
		w: w,
		base: chunk{
			ID:      completionID(req.Seq),
			Object:  "chat.completion.chunk",
			Created: time.Now().Unix(),
			Model:   modelOf(req, r),
		},
		withUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		delay:     r.ChunkDelay,
		wait:      func(d time.Duration) bool { return s.wait(hr, d) },
		ok:        true,
	}
	sw.flusher, _ = w.(http.Flusher)
	if sw.withUsage {
		sw.base.Usage = json.RawMessage("null")
	}

	empty := ""
	sw.send(delta{Role: "assistant", Content: &empty}, nil)
	for _, piece := range words(r.ReasoningContent) {
		sw.send(delta{ReasoningContent: piece}, nil)
	}
	for _, piece := range words(r.Content) {
		sw.send(delta{Content: &piece}, nil)
	}
	for i := range r.ToolCalls {
		c := &r.ToolCalls[i]
		idx := i
		sw.send(delta{ToolCalls: []toolCallWire{{
			Index: &idx, ID: callID(req.Seq, i, c), Type: "function",
			Function: functionWire{Name: c.Name},
		}}}, nil)
		for _, frag := range fragments(c.Arguments, 3) {
			sw.send(delta{ToolCalls: []toolCallWire{{Index: &idx, Function: functionWire{Arguments: frag}}}}, nil)
		}
	}
	finish := r.finishReason()
	sw.send(delta{}, &finish)
	if sw.withUsage && sw.ok {
		u := usageOf(req, r)
		c := sw.base
		c.Choices = []chunkChoice{}
		c.Usage, _ = json.Marshal(u)
		sw.write(&c)
	}
	if sw.ok {
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	}
}

func (sw *streamWriter) send(d delta, finish *string) {
	if !sw.ok {
		return
	}
	c := sw.base
	c.Choices = []chunkChoice{{Delta: d, FinishReason: finish}}
	sw.write(&c)
}

func (sw *streamWriter) write(c *chunk) {
	body, err := json.Marshal(c)
	if err != nil {
		sw.ok = false
		return
	}
	buf := make([]byte, 0, len(body)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, body...)
	buf = append(buf, "\n\n"...)
	if _, err := sw.w.Write(buf); err != nil {
		sw.ok = false
		return
	}
	if sw.delay > 0 {
		if sw.flusher != nil {
			sw.flusher.Flush()
		}
		sw.ok = sw.wait(sw.delay)
	}
}

// words splits s after each space, so joining the pieces gives s back.
func words(s string) []string {
	if s == "" {
		return nil
	}
	return strings.SplitAfter(s, " ")
}

// fragments splits s into at most n pieces of similar size on rune
// boundaries.
func fragments(s string, n int) []string {
	if len(s) <= n {
		return []string{s}
	}
	size := (len(s) + n - 1) / n
	var out []string
	for len(s) > 0 {
		cut := min(size, len(s))
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}
