package llmtest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
)

func post(t testing.TB, srv *llmtest.Server, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(srv.URL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func TestStreamFormat(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.ToolCalls(llmtest.Call("write_file", `{"path":"a.txt","content":"hello"}`)).
		WithContent("ok then").WithReasoning("think"))
	resp := post(t, srv, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	var (
		events  []string
		content string
		args    string
		finish  string
		usage   bool
	)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		events = append(events, data)
		if data == "[DONE]" {
			continue
		}
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    int `json:"index"`
						Function struct {
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		if c.Object != "chat.completion.chunk" {
			t.Errorf("object %q", c.Object)
		}
		if string(c.Usage) != "null" && len(c.Usage) > 0 {
			usage = len(c.Choices) == 0
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				content += *ch.Delta.Content
			}
			for _, tc := range ch.Delta.ToolCalls {
				args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %v", events)
	}
	if content != "ok then" || args != `{"path":"a.txt","content":"hello"}` || finish != "tool_calls" || !usage {
		t.Errorf("content %q args %q finish %q usage chunk %v", content, args, finish, usage)
	}
}

func TestReplyPrecedence(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.WithFailures(1, http.StatusTooManyRequests))
	srv.Enqueue(llmtest.Text("queued"))
	srv.Handle(func(req *llmtest.RecordedRequest) llmtest.Reply {
		return llmtest.Text(fmt.Sprintf("handled %d", req.Seq))
	})
	want := []struct {
		status     int
		retryAfter string
		content    string
	}{
		{http.StatusTooManyRequests, "0", ""},
		{http.StatusOK, "", "queued"},
		{http.StatusOK, "", "handled 3"},
	}
	for i, w := range want {
		resp := post(t, srv, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != w.status || resp.Header.Get("Retry-After") != w.retryAfter {
			t.Errorf("request %d: status %d retry-after %q, want %d %q", i, resp.StatusCode, resp.Header.Get("Retry-After"), w.status, w.retryAfter)
		}
		if w.content != "" && !bytes.Contains(body, []byte(`"content":"`+w.content+`"`)) {
			t.Errorf("request %d: body %s, want content %q", i, body, w.content)
		}
	}
	if srv.Pending() != 0 || srv.RequestCount() != 3 || len(srv.Requests()) != 3 {
		t.Errorf("pending %d count %d recorded %d", srv.Pending(), srv.RequestCount(), len(srv.Requests()))
	}
}

func TestEcho(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, messages, want string
	}{
		{"user text", `[{"role":"user","content":"hello"}]`, "echo: hello"},
		{"multipart", `[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}]`, "echo: look"},
		{"tool result", `[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}]`, "tool result: 42"},
	}
	srv := llmtest.NewServer(t)
	for _, tt := range tests {
		resp := post(t, srv, `{"model":"m","messages":`+tt.messages+`}`)
		body, _ := io.ReadAll(resp.Body)
		if !bytes.Contains(body, []byte(`"content":"`+tt.want+`"`)) {
			t.Errorf("%s: body %s, want %q", tt.name, body, tt.want)
		}
	}
}

func TestMaxRecordedAndConcurrency(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.WithMaxRecorded(5))
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := http.Post(srv.URL()+"/chat/completions", "application/json",
				strings.NewReader(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"%d"}]}`, i)))
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		})
	}
	wg.Wait()
	if got := srv.RequestCount(); got != n {
		t.Errorf("RequestCount = %d, want %d", got, n)
	}
	if got := len(srv.Requests()); got != 5 {
		t.Errorf("recorded %d, want 5", got)
	}
}

func TestModelsAndErrors(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.WithModels("a", "b"), llmtest.WithAPIKey("k"))
	resp, err := http.Get(srv.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !bytes.Contains(body, []byte(`"id":"a"`)) || !bytes.Contains(body, []byte(`"id":"b"`)) {
		t.Errorf("models %s", body)
	}
	if r := post(t, srv, `{"model":"m","messages":[]}`); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: status %d", r.StatusCode)
	}
	if r := post(t, srv, `{not json`); r.StatusCode != http.StatusBadRequest {
		t.Errorf("bad body: status %d", r.StatusCode)
	}
}

func BenchmarkServer(b *testing.B) {
	srv := llmtest.NewServer(b, llmtest.WithMaxRecorded(100))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hello there"}]}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(srv.URL()+"/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	})
}

func TestWithLightRequests(t *testing.T) {
	t.Parallel()
	const body = `{"model":"m","messages":[{"role":"system","content":"long prompt"},{"role":"user","content":"hi"}],"tools":[` +
		`{"type":"function","function":{"name":"read_file","description":"Read a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}],` +
		`"max_completion_tokens":7,"stream":false,"stream_options":null,"temperature":0.5}`
	tests := []struct {
		name       string
		opts       []llmtest.Option
		wantSchema bool
		wantMsgs   int
	}{
		{"default", nil, true, 2},
		{"light", []llmtest.Option{llmtest.WithLightRequests()}, false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t, tc.opts...)
			if resp := post(t, srv, body); resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			req, ok := srv.LastRequest()
			if !ok {
				t.Fatal("no request recorded")
			}
			if got := req.LastUserText(); got != "hi" || req.Model != "m" {
				t.Errorf("model %q, user text %q: want m, hi", req.Model, got)
			}
			if len(req.Messages) != tc.wantMsgs {
				t.Errorf("%d messages recorded, want %d", len(req.Messages), tc.wantMsgs)
			}
			if len(req.Tools) != 1 || req.Tools[0].Type != "function" || req.Tools[0].Function == nil {
				t.Fatalf("tools %+v: want one function", req.Tools)
			}
			f := req.Tools[0].Function
			if f.Name != "read_file" || f.Description != "Read a file." {
				t.Errorf("tool %q %q: want read_file, Read a file.", f.Name, f.Description)
			}
			if got := f.Parameters != nil; got != tc.wantSchema {
				t.Errorf("schema decoded %v, want %v (%v)", got, tc.wantSchema, f.Parameters)
			}
			if req.MaxCompletionTokens != 7 || req.Temperature != 0.5 {
				t.Errorf("max_completion_tokens %d, temperature %v: want 7, 0.5", req.MaxCompletionTokens, req.Temperature)
			}
		})
	}
}

// TestLightRequestsRefuseMalformed checks that reading only part of a
// request does not make the server accept what the full decode refuses.
func TestLightRequestsRefuseMalformed(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body string }{
		{"truncated", `{"model":"m","messages":[{"role":"user","content":"hi"}`},
		{"not an object", `["model"]`},
		{"bad last message", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":7}]}`},
		{"bad field", `{"model":7,"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, light := range []bool{false, true} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/light=%v", tc.name, light), func(t *testing.T) {
				t.Parallel()
				var opts []llmtest.Option
				if light {
					opts = append(opts, llmtest.WithLightRequests())
				}
				srv := llmtest.NewServer(t, opts...)
				if resp := post(t, srv, tc.body); resp.StatusCode != http.StatusBadRequest {
					t.Errorf("status %d, want 400", resp.StatusCode)
				}
				if n := len(srv.Requests()); n != 0 {
					t.Errorf("%d requests recorded, want 0", n)
				}
			})
		}
	}
}
