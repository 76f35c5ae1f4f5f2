package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// sleepRecorder stands in for the real wait between retries.
type sleepRecorder struct {
	mu     sync.Mutex
	waited []time.Duration
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waited = append(s.waited, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleepRecorder) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waited)
}

// newProvider returns a Provider talking to srv with the sleep injected.
func newProvider(t *testing.T, srv *llmtest.Server, edit func(*llm.Config), opts ...llm.Option) (*llm.Provider, *sleepRecorder) {
	t.Helper()
	cfg := llm.Config{APIBase: srv.URL(), Model: "test-model"}
	if edit != nil {
		edit(&cfg)
	}
	rec := &sleepRecorder{}
	opts = append([]llm.Option{llm.WithSleep(rec.sleep), llm.WithBackoff(100*time.Millisecond, time.Second)}, opts...)
	p, err := llm.New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p, rec
}

func userMsg(text string) []*nanofleetv1.ChatMessage {
	return []*nanofleetv1.ChatMessage{
		{Role: "system", Content: "You are a test."},
		{Role: "user", Content: text},
	}
}

// deltas collects what OnDelta receives.
type deltas struct {
	calls              int
	content, reasoning strings.Builder
}

func (d *deltas) on(content, reasoning string) {
	d.calls++
	d.content.WriteString(content)
	d.reasoning.WriteString(reasoning)
}

// asked is a request of text, streamed when stream is set, with what its
// deltas bring.
func asked(text string, stream bool) (llm.Request, *deltas) {
	req := llm.Request{Messages: userMsg(text)}
	d := &deltas{}
	if stream {
		req.OnDelta = d.on
	}
	return req, d
}

func TestChatReplies(t *testing.T) {
	t.Parallel()
	type call struct{ name, args string }
	tests := []struct {
		name          string
		reply         llmtest.Reply
		wantContent   string
		wantReasoning string
		wantCalls     []call
		wantFinish    string
	}{
		{
			name:        "text",
			reply:       llmtest.Text("hello brave new world"),
			wantContent: "hello brave new world",
			wantFinish:  "stop",
		},
		{
			name: "tool calls",
			reply: llmtest.ToolCalls(
				llmtest.Call("write_file", `{"path":"a.txt","content":"x"}`),
				llmtest.Call("read_file", `{"path":"some/longer/path/b.txt"}`),
			),
			wantCalls: []call{
				{"write_file", `{"path":"a.txt","content":"x"}`},
				{"read_file", `{"path":"some/longer/path/b.txt"}`},
			},
			wantFinish: "tool_calls",
		},
		{
			name:        "tool call with text",
			reply:       llmtest.ToolCalls(llmtest.Call("list_dir", `{}`)).WithContent("let me look"),
			wantContent: "let me look",
			wantCalls:   []call{{"list_dir", `{}`}},
			wantFinish:  "tool_calls",
		},
		{
			name:          "reasoning content",
			reply:         llmtest.Text("42").WithReasoning("six times seven is forty two"),
			wantContent:   "42",
			wantReasoning: "six times seven is forty two",
			wantFinish:    "stop",
		},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			name := tt.name
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				srv := llmtest.NewServer(t)
				srv.Enqueue(tt.reply)
				p, _ := newProvider(t, srv, nil)
				req, d := asked("hi", stream)
				resp, err := p.Chat(t.Context(), req)
				if err != nil {
					t.Fatalf("Chat: %v", err)
				}
				if resp.Content != tt.wantContent || resp.ReasoningContent != tt.wantReasoning {
					t.Errorf("content %q reasoning %q, want %q %q", resp.Content, resp.ReasoningContent, tt.wantContent, tt.wantReasoning)
				}
				if resp.FinishReason != tt.wantFinish {
					t.Errorf("finish %q, want %q", resp.FinishReason, tt.wantFinish)
				}
				if resp.Model != "test-model" {
					t.Errorf("model %q, want test-model", resp.Model)
				}
				if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
					t.Errorf("usage %+v, want counts", resp.Usage)
				}
				var got []call
				ids := map[string]bool{}
				for _, c := range resp.ToolCalls {
					got = append(got, call{c.GetName(), c.GetArgumentsJson()})
					if c.GetId() == "" || ids[c.GetId()] {
						t.Errorf("tool call id %q empty or repeated", c.GetId())
					}
					ids[c.GetId()] = true
				}
				if !slices.Equal(got, tt.wantCalls) {
					t.Errorf("tool calls %v, want %v", got, tt.wantCalls)
				}
				last, _ := srv.LastRequest()
				if last.Stream != stream {
					t.Errorf("request stream=%v, want %v", last.Stream, stream)
				}
				if !stream {
					return
				}
				if d.content.String() != tt.wantContent || d.reasoning.String() != tt.wantReasoning {
					t.Errorf("deltas %q %q, want %q %q", d.content.String(), d.reasoning.String(), tt.wantContent, tt.wantReasoning)
				}
				if n := len(strings.Fields(tt.wantContent + " " + tt.wantReasoning)); d.calls < n {
					t.Errorf("OnDelta called %d times, want >= %d", d.calls, n)
				}
			})
		}
	}
}

func TestChatRequestEncoding(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.WithAPIKey("sk-test"))
	p, _ := newProvider(t, srv, func(c *llm.Config) {
		c.APIKey = "sk-test"
		c.ExtraHeaders = map[string]string{"X-Title": "nanofleet"}
	})
	msgs := []*nanofleetv1.ChatMessage{
		{Role: "system", Content: "sys"},
		{Role: "user", Content: "what is this?", Media: []*nanofleetv1.MediaRef{
			{MimeType: "image/png", Url: "https://example.com/cat.png"},
			{Url: "data:image/jpeg;base64,AAAA"},
			{MimeType: "application/pdf", Url: "https://example.com/doc.pdf"},
			{MimeType: "image/png", Object: "only-in-object-store"},
		}},
		{Role: "assistant", ReasoningContent: "hmm", ToolCalls: []*nanofleetv1.ToolCall{
			{Id: "call_1", Name: "read_file", ArgumentsJson: `{"path":"a"}`},
		}},
		{Role: "tool", ToolCallId: "call_1", Name: "read_file", Content: ""},
	}
	tools := []*nanofleetv1.ToolDefinition{
		{Name: "write_file", ParametersJson: `{"type":"object","properties":{"path":{"type":"string"}}}`},
		{Name: "exec", Description: "run"},
		{Name: "read_file", ParametersJson: `{"type":"object"}`},
	}
	if _, err := p.Chat(t.Context(), llm.Request{Messages: msgs, Tools: tools, Temperature: 0.5, MaxTokens: 99}); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	got, ok := srv.LastRequest()
	if !ok {
		t.Fatal("no request recorded")
	}
	if names := got.ToolNames(); !slices.Equal(names, []string{"exec", "read_file", "write_file"}) {
		t.Errorf("tools sent as %v, want sorted", names)
	}
	params, _ := json.Marshal(got.Tools[2].Function.Parameters)
	if !strings.Contains(string(params), `"path"`) {
		t.Errorf("write_file parameters lost: %s", params)
	}
	//lint:ignore SA1019 max_tokens is what the provider sends
	maxTokens := got.MaxTokens
	if got.Temperature != 0.5 || maxTokens != 99 {
		t.Errorf("temperature %v max tokens %d", got.Temperature, maxTokens)
	}
	if h := got.Header.Get("X-Title"); h != "nanofleet" {
		t.Errorf("X-Title header %q", h)
	}
	user := got.Messages[1]
	var parts []string
	for _, part := range user.MultiContent {
		switch part.Type {
		case openai.ChatMessagePartTypeText:
			parts = append(parts, "text:"+part.Text)
		case openai.ChatMessagePartTypeImageURL:
			parts = append(parts, "image:"+part.ImageURL.URL)
		}
	}
	wantParts := []string{"text:what is this?", "image:https://example.com/cat.png", "image:data:image/jpeg;base64,AAAA"}
	if !slices.Equal(parts, wantParts) {
		t.Errorf("user parts %v, want %v", parts, wantParts)
	}
	asst := got.Messages[2]
	if asst.ReasoningContent != "hmm" || len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Function.Arguments != `{"path":"a"}` {
		t.Errorf("assistant message %+v", asst)
	}
	if tool := got.Messages[3]; tool.ToolCallID != "call_1" || tool.Content == "" {
		t.Errorf("tool message %+v", tool)
	}
}

func TestChatInvalidRequest(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	p, _ := newProvider(t, srv, nil)
	tests := []struct {
		name string
		req  llm.Request
	}{
		{"no messages", llm.Request{}},
		{"bad tool schema", llm.Request{Messages: userMsg("x"), Tools: []*nanofleetv1.ToolDefinition{{Name: "t", ParametersJson: "{"}}}},
		{"no role", llm.Request{Messages: []*nanofleetv1.ChatMessage{{Content: "x"}}}},
	}
	for _, tt := range tests {
		if _, err := p.Chat(t.Context(), tt.req); !errors.Is(err, llm.ErrInvalidRequest) {
			t.Errorf("%s: err %v, want ErrInvalidRequest", tt.name, err)
		}
	}
	if n := srv.RequestCount(); n != 0 {
		t.Errorf("%d requests sent for invalid input", n)
	}
}

func TestChatRetries(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name       string
		opts       []llmtest.Option
		replies    []llmtest.Reply
		maxRetries int
		popts      []llm.Option
		stream     bool
		wantErr    bool
		wantStatus int // of the *APIError when wantErr
		wantLimit  bool
		wantReqs   int
		// wantWaits lists the exact waits; a zero entry means "backoff",
		// checked against [base/2·2ⁿ, base·2ⁿ].
		wantWaits []time.Duration
	}{
		{
			name:      "429 retry-after seconds",
			replies:   []llmtest.Reply{llmtest.Fail(429, "2"), llmtest.Text("ok")},
			wantReqs:  2,
			wantWaits: []time.Duration{2 * time.Second},
		},
		{
			name:      "429 retry-after seconds streaming",
			replies:   []llmtest.Reply{llmtest.Fail(429, "3"), llmtest.Text("ok")},
			stream:    true,
			wantReqs:  2,
			wantWaits: []time.Duration{3 * time.Second},
		},
		{
			name:      "429 retry-after http date",
			replies:   []llmtest.Reply{llmtest.Fail(429, now.Add(7*time.Second).Format(http.TimeFormat)), llmtest.Text("ok")},
			wantReqs:  2,
			wantWaits: []time.Duration{7 * time.Second},
		},
		{
			name:      "injected 429 retry-after 0",
			opts:      []llmtest.Option{llmtest.WithFailures(2, 429)},
			wantReqs:  3,
			wantWaits: []time.Duration{-1, -1}, // exactly zero
		},
		{
			name:      "500 backoff",
			replies:   []llmtest.Reply{llmtest.Fail(500, ""), llmtest.Fail(502, ""), llmtest.Text("ok")},
			wantReqs:  3,
			wantWaits: []time.Duration{0, 0},
		},
		{
			name:       "5xx exhausted",
			opts:       []llmtest.Option{llmtest.WithFailures(10, 503)},
			maxRetries: 2,
			wantErr:    true,
			wantStatus: 503,
			wantReqs:   3,
			wantWaits:  []time.Duration{0, 0},
		},
		{
			name:       "429 storm outlasts the retries for other failures",
			opts:       []llmtest.Option{llmtest.WithFailures(10, 429)},
			maxRetries: 1,
			wantReqs:   11,
			wantWaits:  []time.Duration{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
		},
		{
			name:       "429 beyond the patience is ErrRateLimited",
			opts:       []llmtest.Option{llmtest.WithFailures(10, 429)},
			maxRetries: 1,
			popts:      []llm.Option{llm.WithRateLimitPatience(0)},
			stream:     true,
			wantErr:    true,
			wantStatus: 429,
			wantLimit:  true,
			wantReqs:   2,
			wantWaits:  []time.Duration{-1},
		},
		{
			name:       "400 not retried",
			replies:    []llmtest.Reply{llmtest.Fail(400, "")},
			wantErr:    true,
			wantStatus: 400,
			wantReqs:   1,
		},
		{
			name:       "retry-after beyond limit not retried",
			replies:    []llmtest.Reply{llmtest.Fail(429, "3600")},
			wantErr:    true,
			wantStatus: 429,
			wantLimit:  true,
			wantReqs:   1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t, tt.opts...)
			srv.Enqueue(tt.replies...)
			p, sleeps := newProvider(t, srv, func(c *llm.Config) { c.MaxRetries = tt.maxRetries },
				append(tt.popts, llm.WithClock(func() time.Time { return now }))...)
			req := llm.Request{Messages: userMsg("hi")}
			if tt.stream {
				req.OnDelta = func(string, string) {}
			}
			resp, err := p.Chat(t.Context(), req)
			switch {
			case tt.wantErr && err == nil:
				t.Fatalf("Chat succeeded: %+v", resp)
			case !tt.wantErr && err != nil:
				t.Fatalf("Chat: %v", err)
			case tt.wantErr:
				var ae *llm.APIError
				if !errors.As(err, &ae) || ae.Status != tt.wantStatus {
					t.Errorf("err %v, want *APIError status %d", err, tt.wantStatus)
				}
				if got := errors.Is(err, llm.ErrRateLimited); got != tt.wantLimit {
					t.Errorf("errors.Is(ErrRateLimited) = %v", got)
				}
				var oe *openai.APIError
				if !errors.As(err, &oe) {
					t.Errorf("err %v does not unwrap to *openai.APIError", err)
				}
			default:
				if resp.Content == "" {
					t.Errorf("empty content after retries")
				}
			}
			if n := srv.RequestCount(); n != tt.wantReqs {
				t.Errorf("%d requests, want %d", n, tt.wantReqs)
			}
			waits := sleeps.waits()
			if len(waits) != len(tt.wantWaits) {
				t.Fatalf("waits %v, want %d", waits, len(tt.wantWaits))
			}
			for i, w := range tt.wantWaits {
				switch {
				case w == -1 && waits[i] != 0:
					t.Errorf("wait %d = %v, want 0", i, waits[i])
				case w == 0:
					hi := 100 * time.Millisecond << i
					if waits[i] < hi/2 || waits[i] > hi {
						t.Errorf("backoff %d = %v, want in [%v, %v]", i, waits[i], hi/2, hi)
					}
				case w > 0 && waits[i] != w:
					t.Errorf("wait %d = %v, want %v", i, waits[i], w)
				}
			}
		})
	}
}

func TestChatFallback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		failing    map[string]int // model -> status
		wantModels []string
		wantErr    bool
		wantAnswer string
	}{
		{
			name:       "third model answers",
			failing:    map[string]int{"primary": 500, "second": 404},
			wantModels: []string{"primary", "primary", "second", "third"},
			wantAnswer: "third",
		},
		{
			name:       "primary answers",
			wantModels: []string{"primary"},
			wantAnswer: "primary",
		},
		{
			name:       "all fail",
			failing:    map[string]int{"primary": 503, "second": 503, "third": 503},
			wantModels: []string{"primary", "primary", "second", "second", "third", "third"},
			wantErr:    true,
		},
		{
			name:       "401 stops fallback",
			failing:    map[string]int{"primary": 401},
			wantModels: []string{"primary"},
			wantErr:    true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t)
			srv.Handle(func(req *llmtest.RecordedRequest) llmtest.Reply {
				if status, ok := tt.failing[req.Model]; ok {
					return llmtest.Fail(status, "")
				}
				return llmtest.Text("answer from " + req.Model)
			})
			p, _ := newProvider(t, srv, func(c *llm.Config) {
				c.Model = "primary"
				c.MaxRetries = 1
				c.FallbackModels = []string{"second", "third", "primary"}
			})
			resp, err := p.Chat(t.Context(), llm.Request{Messages: userMsg("hi")})
			var models []string
			for _, r := range srv.Requests() {
				models = append(models, r.Model)
			}
			if !slices.Equal(models, tt.wantModels) {
				t.Errorf("models tried %v, want %v", models, tt.wantModels)
			}
			if tt.wantErr {
				var ae *llm.APIError
				if !errors.As(err, &ae) || ae.Status != tt.failing["primary"] {
					t.Errorf("err %v, want the primary's *APIError first", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if resp.Model != tt.wantAnswer || resp.Content != "answer from "+tt.wantAnswer {
				t.Errorf("answer %q from %q, want %q", resp.Content, resp.Model, tt.wantAnswer)
			}
		})
	}
}

func TestChatTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 20 * time.Millisecond
	// The server would answer after an hour and the caller waits 30 s: an
	// attempt can end with a deadline only by the provider's own timeout.
	srv := llmtest.NewServer(t, llmtest.WithLatency(time.Hour))
	p, sleeps := newProvider(t, srv, func(c *llm.Config) {
		c.Timeout = timeout
		c.MaxRetries = 1
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := p.Chat(ctx, llm.Request{Messages: userMsg("slow")})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the caller's deadline ended the call (%v), not the provider's %s timeout", err, timeout)
	}
	if n, w := srv.RequestCount(), len(sleeps.waits()); n != 2 || w != 1 {
		t.Errorf("%d requests and %d waits, want the timeout retried once", n, w)
	}
}

func TestChatStreamInterrupted(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	// The first word arrives after ~250 ms, the whole stream would take
	// ~7.5 s: the 2 s timeout falls in between even on a loaded machine
	// (with 5 ms and 50 ms, under a load of 14, the timeout sometimes
	// came before the first word).
	srv.Enqueue(llmtest.Text(strings.Repeat("word ", 30)).WithChunkDelay(250 * time.Millisecond))
	p, sleeps := newProvider(t, srv, func(c *llm.Config) {
		c.Timeout = 2 * time.Second
		c.FallbackModels = []string{"other"}
	})
	var d deltas
	_, err := p.Chat(t.Context(), llm.Request{Messages: userMsg("x"), OnDelta: d.on})
	if !errors.Is(err, llm.ErrStreamInterrupted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want ErrStreamInterrupted wrapping the deadline", err)
	}
	if d.calls == 0 {
		t.Error("OnDelta never called")
	}
	if n := srv.RequestCount(); n != 1 || len(sleeps.waits()) != 0 {
		t.Errorf("%d requests, %d waits: partial streams must not be replayed", n, len(sleeps.waits()))
	}
}

// TestChatStreamCut: a stream whose body ends without a finish reason
// and [DONE] (a proxy or the provider dropped the connection) was cut,
// and must not pass for a whole answer.
func TestChatStreamCut(t *testing.T) {
	t.Parallel()
	chunk := func(content string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + content + `"}}]}` + "\n\n"
	}
	tests := []struct {
		name    string
		body    string
		emitted bool
	}{
		{"cut after some words", chunk("half ") + chunk("an "), true},
		{"cut before any word", `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"}}]}` + "\n\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			p, err := llm.New(llm.Config{APIBase: srv.URL, Model: "m"}, llm.WithSleep(func(context.Context, time.Duration) error { return nil }), llm.WithBackoff(time.Millisecond, time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			var d deltas
			res, err := p.Chat(t.Context(), llm.Request{Messages: userMsg("x"), OnDelta: d.on})
			if err == nil {
				t.Fatalf("answer %q taken whole", res.Content)
			}
			if errors.Is(err, llm.ErrStreamInterrupted) != tt.emitted {
				t.Errorf("err %v: interrupted %v, want %v", err, !tt.emitted, tt.emitted)
			}
		})
	}
}

func TestChatCallerCancel(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.WithFailures(5, 500))
	p, sleeps := newProvider(t, srv, func(c *llm.Config) { c.FallbackModels = []string{"other"} })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := p.Chat(ctx, llm.Request{Messages: userMsg("x")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if len(sleeps.waits()) != 0 {
		t.Errorf("retried after caller cancelled")
	}
}

func TestModelPrefixStripped(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	p, _ := newProvider(t, srv, func(c *llm.Config) {
		c.Name = "openrouter"
		c.APIKey = "k"
		c.Model = "openrouter/anthropic/claude-3"
	})
	if _, err := p.Chat(t.Context(), llm.Request{Messages: userMsg("x")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := srv.LastRequest(); got.Model != "anthropic/claude-3" {
		t.Errorf("model sent %q", got.Model)
	}
}

func TestAzure(t *testing.T) {
	t.Parallel()
	var (
		mu        sync.Mutex
		gotPath   string
		gotKey    string
		gotAPIVer string
	)
	ts := newRawServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotPath, gotKey, gotAPIVer = r.URL.Path, r.Header.Get("api-key"), r.URL.Query().Get("api-version")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	})
	p, err := llm.New(llm.Config{Name: "azure", APIBase: ts, APIKey: "az-key", Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Chat(t.Context(), llm.Request{Messages: userMsg("x")})
	if err != nil || resp.Content != "hi" {
		t.Fatalf("Chat: %v %+v", err, resp)
	}
	mu.Lock()
	defer mu.Unlock()
	if gotPath != "/openai/deployments/gpt-4o/chat/completions" || gotKey != "az-key" || gotAPIVer == "" {
		t.Errorf("azure request path %q key %q api-version %q", gotPath, gotKey, gotAPIVer)
	}
}

// TestMaxConcurrent checks that the provider never has more calls in flight
// than its bound, and that the ones over it wait instead of failing.
func TestMaxConcurrent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		bound int
		calls int
		want  int // most calls the server saw at once
	}{
		{"bounded", 2, 6, 2},
		{"one at a time", 1, 4, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var inflight, peak atomic.Int32
			arrived := make(chan struct{}, tt.calls)
			release := make(chan struct{})
			url := newRawServer(t, func(w http.ResponseWriter, r *http.Request) {
				n := inflight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				arrived <- struct{}{}
				select { // a test that failed early never releases: the server's Close would wait
				case <-release:
				case <-r.Context().Done():
				}
				inflight.Add(-1) // before answering: the answer frees the client's place
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
			})
			p, err := llm.New(llm.Config{APIBase: url, Model: "m", MaxConcurrent: tt.bound})
			if err != nil {
				t.Fatal(err)
			}
			errs := make(chan error, tt.calls)
			for range tt.calls {
				go func() {
					_, err := p.Chat(t.Context(), llm.Request{Messages: userMsg("hi")})
					errs <- err
				}()
			}
			// Let the bound's worth arrive, then release one call at a time:
			// each release lets exactly one waiter through.
			for i := range tt.calls {
				select {
				case <-arrived:
				case <-time.After(10 * time.Second):
					t.Fatalf("call %d never reached the server", i)
				}
				if i >= tt.bound-1 {
					release <- struct{}{}
				}
			}
			for range tt.bound - 1 {
				release <- struct{}{}
			}
			for range tt.calls {
				select {
				case err := <-errs:
					if err != nil {
						t.Errorf("Chat: %v", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("a call never returned")
				}
			}
			if got := int(peak.Load()); got != tt.want {
				t.Errorf("server saw %d calls at once, want %d", got, tt.want)
			}
		})
	}
}

// TestChatResponseTooLarge: a response body past MaxResponseBytes fails
// the call once, without a retry, whether answered whole or streamed;
// read whole, a 200 MB answer took an all-in-one to 1.1 GB resident.
func TestChatResponseTooLarge(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("a", llm.MaxResponseBytes+1)
	for name, stream := range map[string]bool{"whole": false, "streamed": true} {
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewServer(t)
			srv.Enqueue(llmtest.Text(huge))
			p, sleeps := newProvider(t, srv, nil)
			req, _ := asked("x", stream)
			_, err := p.Chat(t.Context(), req)
			if !errors.Is(err, llm.ErrResponseTooLarge) {
				t.Fatalf("err %v, want ErrResponseTooLarge", err)
			}
			if n := srv.RequestCount(); n != 1 || len(sleeps.waits()) != 0 {
				t.Errorf("%d requests, %d waits: want one, not retried", n, len(sleeps.waits()))
			}
		})
	}
}
