package openaiapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/httpjson"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/watch"
)

// storageCheck is how often a waiting request asks whether the store
// filled up.
const storageCheck = time.Second

// keepAlive is how often an idle stream gets an SSE comment, so proxies do
// not close it during a long turn.
const keepAlive = 15 * time.Second

// turn answers one request from the replies of its turn.
type turn struct {
	s       *Server
	w       http.ResponseWriter
	id      string
	created int64
	stream  bool
	// includeUsage: the stream ends with a chunk carrying the usage.
	includeUsage bool
	// replay: the watcher also reads replies stored before the request,
	// so only those answering its own message count.
	replay bool

	started  bool // stream headers and the role chunk are out
	streamed strings.Builder
	answer   []string // message-tool sends, then the final answer
	usage    *nanofleetv1.TokenUsage
}

func (t *turn) run(ctx context.Context, wch *watch.Watcher, inboundID string) {
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	var storage <-chan time.Time
	if t.s.deps.Storage != nil {
		st := time.NewTicker(storageCheck)
		defer st.Stop()
		storage = st.C
	}
	for {
		select {
		case <-storage:
			if err := t.s.deps.Storage(); err != nil {
				// The turn cannot commit its answer until space is
				// freed: say so now rather than hold the client.
				t.s.log.Warn("api request ended: storage full", "err", err)
				if t.stream && t.started {
					t.event(map[string]any{"error": map[string]any{"message": "Storage full: the fleet cannot store the answer now; try again once space is freed.", "type": "server_error", "code": "storage_full"}})
					t.done()
					return
				}
				apiError(t.w, http.StatusInsufficientStorage, "server_error", "storage_full",
					"Storage full: the fleet cannot store the answer now. Try again once space is freed.")
				return
			}
		case <-ctx.Done():
			if t.stream && t.started {
				t.event(map[string]any{"error": map[string]any{"message": "The turn did not finish in time.", "type": "timeout"}})
				t.done()
				return
			}
			if errorsIsDeadline(ctx) {
				apiError(t.w, http.StatusGatewayTimeout, "timeout", "", "The turn did not finish in time.")
			}
			return
		case <-tick.C:
			if t.stream {
				t.begin()
				_, _ = fmt.Fprint(t.w, ": keep-alive\n\n")
				t.flush()
			}
		case out := <-wch.C:
			if r := out.GetReplyTo(); r != inboundID && (r != "" || t.replay) {
				continue // another request of the same session
			}
			switch out.GetKind() {
			case nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA:
				if t.stream {
					t.begin()
					t.streamed.WriteString(out.GetContent())
					t.chunk(map[string]any{"content": out.GetContent()}, nil)
				}
			case nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE:
				t.answer = append(t.answer, out.GetContent())
				if out.GetLastOfTurn() {
					// The model answered with the message tool: no final
					// reply follows, and the request waited out its timeout.
					t.usage = out.GetUsage()
					t.finish()
					return
				}
			case nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL:
				if c := out.GetContent(); c != "" {
					t.answer = append(t.answer, c)
				}
				t.usage = out.GetUsage()
				t.finish()
				return
			case nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR:
				t.fail(out.GetContent())
				return
			}
		}
	}
}

func errorsIsDeadline(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// finish sends the answer: whole, or what the deltas did not yet stream.
func (t *turn) finish() {
	content := strings.Join(t.answer, "\n\n")
	if !t.stream {
		httpjson.Write(t.w, http.StatusOK, map[string]any{
			"id": t.id, "object": "chat.completion", "created": t.created, "model": t.s.model,
			"choices": []any{map[string]any{
				"index": 0, "message": map[string]any{"role": "assistant", "content": content},
				"finish_reason": "stop",
			}},
			"usage": usageJSON(t.usage),
		})
		return
	}
	t.begin()
	if rest, ok := strings.CutPrefix(content, t.streamed.String()); ok && rest != "" {
		t.chunk(map[string]any{"content": rest}, nil)
	}
	stop := "stop"
	t.chunk(map[string]any{}, &stop)
	if t.includeUsage {
		// As OpenAI sends it: no choices, the usage of the whole request.
		t.event(map[string]any{
			"id": t.id, "object": "chat.completion.chunk", "created": t.created, "model": t.s.model,
			"choices": []any{}, "usage": usageJSON(t.usage),
		})
	}
	t.done()
}

// usageJSON is the turn's usage in OpenAI's shape: every model call of the
// turn (tool rounds included) summed; zeros when the model reported none.
func usageJSON(u *nanofleetv1.TokenUsage) map[string]any {
	return map[string]any{
		"prompt_tokens":             u.GetPromptTokens(),
		"completion_tokens":         u.GetCompletionTokens(),
		"total_tokens":              u.GetPromptTokens() + u.GetCompletionTokens(),
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.GetCachedTokens()},
		"completion_tokens_details": map[string]any{"reasoning_tokens": u.GetReasoningTokens()},
	}
}

func (t *turn) fail(msg string) {
	if msg == "" {
		msg = "The turn failed."
	}
	if !t.stream || !t.started {
		apiError(t.w, http.StatusBadGateway, "server_error", "", msg)
		return
	}
	t.event(map[string]any{"error": map[string]any{"message": msg, "type": "server_error"}})
	t.done()
}

// begin sends the stream's headers and the first chunk, once.
func (t *turn) begin() {
	if t.started {
		return
	}
	t.started = true
	h := t.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	t.w.WriteHeader(http.StatusOK)
	t.chunk(map[string]any{"role": "assistant", "content": ""}, nil)
}

func (t *turn) chunk(delta map[string]any, finish *string) {
	var fr any
	if finish != nil {
		fr = *finish
	}
	t.event(map[string]any{
		"id": t.id, "object": "chat.completion.chunk", "created": t.created, "model": t.s.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fr}},
	})
}

func (t *turn) event(v any) {
	data, _ := json.Marshal(v)
	_, _ = fmt.Fprintf(t.w, "data: %s\n\n", data)
	t.flush()
}

func (t *turn) done() {
	_, _ = fmt.Fprint(t.w, "data: [DONE]\n\n")
	t.flush()
}

func (t *turn) flush() {
	if f, ok := t.w.(http.Flusher); ok {
		f.Flush()
	}
}
