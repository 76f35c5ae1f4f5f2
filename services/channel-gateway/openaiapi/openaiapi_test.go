package openaiapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/openaiapi"
)

const key = "sk-test-12345"

// script answers "fail" with an error and everything else with deltas
// and a final answer that goes on past them.
func script(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
	if in.GetContent() == "by message" {
		// The model answered with the message tool: the turn's last
		// reply is a message, and no final follows.
		return []*nanofleetv1.OutboundMessage{
			{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE, Content: "first"},
			{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE, Content: "second", LastOfTurn: true},
		}
	}
	if in.GetContent() == "fail" {
		return []*nanofleetv1.OutboundMessage{{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR, Content: "model unavailable"}}
	}
	return []*nanofleetv1.OutboundMessage{
		workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, "thinking"),
		workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, "You said"),
		workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, ": "),
		workertest.Final("You said: " + in.GetContent()),
	}
}

func start(t *testing.T, opts ...workertest.Option) (*openai.Client, *workertest.Worker, string) {
	t.Helper()
	c, w, url, _ := startBus(t, opts...)
	return c, w, url
}

// startBus is start that also returns the fleet's bus.
func startBus(t *testing.T, opts ...workertest.Option) (*openai.Client, *workertest.Worker, string, *bus.Bus) {
	t.Helper()
	b := bustest.StartJetStream(t, channels.Assets)
	srv := httptest.NewServer(newServer(t, b, nil))
	t.Cleanup(srv.Close)
	w := workertest.Start(t, b, script, opts...)
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = srv.URL + "/v1"
	return openai.NewClientWithConfig(cfg), w, srv.URL, b
}

// newServer is the API on b, publishing through a gateway, with storage
// saying whether the store is full (nil: never).
func newServer(t *testing.T, b *bus.Bus, storage func() error) *openaiapi.Server {
	t.Helper()
	pub, err := gateway.New(gateway.DefaultConfig(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := openaiapi.New(openaiapi.Config{Enabled: true, Token: key}, openaiapi.Deps{Bus: b, Inbox: pub, Storage: storage})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestChatCompletion(t *testing.T) {
	client, w, _ := start(t)
	resp, err := client.CreateChatCompletion(ctx(t), openai.ChatCompletionRequest{
		Model: "nanofleet",
		User:  "alice",
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "be brief"},
			{Role: openai.ChatMessageRoleUser, Content: "an earlier question"},
			{Role: openai.ChatMessageRoleAssistant, Content: "an earlier answer"},
			{Role: openai.ChatMessageRoleUser, Content: "hello there"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "You said: hello there" || resp.Choices[0].FinishReason != openai.FinishReasonStop {
		t.Errorf("response = %+v", resp)
	}
	in := w.Next(t)
	if in.GetChannel() != "api" || in.GetChatId() != "alice" || in.GetContent() != "hello there" || in.GetMetadata()["stream"] != "" {
		t.Errorf("inbound = %v", in)
	}
}

// A turn answered with the message tool ends with a message, not a final
// reply: the request is answered with the messages at once (it waited out
// its timeout, minutes, holding the connection).
func TestAnswerByMessageTool(t *testing.T) {
	client, _, _ := start(t)
	resp, err := client.CreateChatCompletion(ctx(t), openai.ChatCompletionRequest{
		Model: "nanofleet", Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "by message"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "first\n\nsecond" {
		t.Errorf("response = %+v", resp)
	}
}

func TestChatCompletionStream(t *testing.T) {
	// The worker holds the final answer back until the client has seen the
	// deltas, as a model would while it writes.
	release := make(chan struct{})
	client, w, _ := start(t, workertest.HoldUntil(release, 10*time.Second))
	stream, err := client.CreateChatCompletionStream(ctx(t), openai.ChatCompletionRequest{
		Model:    "nanofleet",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "stream me"}},
		Stream:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var chunks []string
	var finish openai.FinishReason
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, r.Choices[0].Delta.Content)
		if strings.Join(chunks, "") == "You said: " {
			close(release)
		}
		if r.Choices[0].FinishReason != "" {
			finish = r.Choices[0].FinishReason
		}
	}
	if in := w.Next(t); in.GetMetadata()["stream"] != "true" {
		t.Errorf("a streaming request did not ask for deltas: %v", in.GetMetadata())
	}
	if got := strings.Join(chunks, ""); got != "You said: stream me" {
		t.Errorf("streamed %q", got)
	}
	// role chunk, two deltas, the rest of the final answer, the stop chunk
	if len(chunks) != 5 || chunks[1] != "You said" || finish != openai.FinishReasonStop {
		t.Errorf("chunks = %q, finish %q", chunks, finish)
	}
}

func TestModels(t *testing.T) {
	client, _, _ := start(t)
	list, err := client.ListModels(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Models) != 1 || list.Models[0].ID != "nanofleet" {
		t.Errorf("models = %+v", list.Models)
	}
}

func TestErrors(t *testing.T) {
	client, _, url := start(t)
	bad := openai.DefaultConfig("wrong-key")
	bad.BaseURL = url + "/v1"
	tests := []struct {
		name   string
		client *openai.Client
		msgs   []openai.ChatCompletionMessage
		status int
	}{
		{"wrong key", openai.NewClientWithConfig(bad), []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}, http.StatusUnauthorized},
		{"no user message", client, []openai.ChatCompletionMessage{{Role: "system", Content: "hi"}}, http.StatusBadRequest},
		{"turn fails", client, []openai.ChatCompletionMessage{{Role: "user", Content: "fail"}}, http.StatusBadGateway},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.client.CreateChatCompletion(ctx(t), openai.ChatCompletionRequest{Model: "nanofleet", Messages: tt.msgs})
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tt.status {
				t.Errorf("err = %v, want an API error with status %d", err, tt.status)
			}
		})
	}
}

func TestSessionHeader(t *testing.T) {
	_, w, url := start(t)
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(`{"model":"nanofleet","user":"ignored","messages":[{"role":"user","content":[{"type":"text","text":"parts"},{"type":"text","text":"work"}]}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Session-Id", "project.x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if in := w.Next(t); in.GetChatId() != "project.x" || in.GetContent() != "parts\nwork" {
		t.Errorf("inbound = %v", in)
	}
}

// TestSessionHeaderErrors: a session id the fleet cannot name a chat by
// is refused as the client's error; a header that was not UTF-8 was
// answered 503, which SDKs retry.
func TestSessionHeaderErrors(t *testing.T) {
	_, _, url := start(t)
	tests := []struct{ name, session, want string }{
		{"too long", strings.Repeat("s", 129), "longer than 128 characters"},
		{"not UTF-8", "caf\xe9", "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions",
				strings.NewReader(`{"model":"nanofleet","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("X-Session-Id", tt.session)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), tt.want) {
				t.Errorf("%d %s, want 400 saying %q", resp.StatusCode, data, tt.want)
			}
		})
	}
}

// TestUserIsTheSender: the request's "user" (OpenAI's end-user id) is the
// inbound message's sender, so that user-scoped memory, usage and budgets
// are each end user's; every request was sender "api", one person whose
// memory all of a key's users shared. No user: "api".
func TestUserIsTheSender(t *testing.T) {
	_, w, url := start(t)
	tests := []struct{ user, session, sender string }{
		{"alice", "s1", "alice"},
		{"bob", "s1", "bob"},
		{"", "s2", "api"},
	}
	for _, tt := range tests {
		body := `{"model":"nanofleet","user":` + quote(tt.user) + `,"messages":[{"role":"user","content":"hi"}]}`
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Session-Id", tt.session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("user %q: status %d", tt.user, resp.StatusCode)
		}
		if in := w.Next(t); in.GetSenderId() != tt.sender || in.GetChatId() != tt.session {
			t.Errorf("user %q: inbound sender %q in %q, want %q in %q", tt.user, in.GetSenderId(), in.GetChatId(), tt.sender, tt.session)
		}
	}
}

// TestBodyErrors: a body of the wrong shape is told in the API's terms,
// never in Go's.
func TestBodyErrors(t *testing.T) {
	_, _, url := start(t)
	tests := []struct{ name, body, want string }{
		{"messages not an array", `{"model":"m","messages":"hi"}`, "Invalid type for 'messages': expected an array, but got string."},
		{"content not text", `{"model":"m","messages":[{"role":"user","content":{"a":1}}]}`, "messages[0].content must be a string or an array of parts"},
		{"stream not a bool", `{"model":"m","stream":"yes","messages":[]}`, "Invalid type for 'stream': expected a bool, but got string."},
		{"body an array", `[1]`, "Invalid type for 'the body': expected an object, but got array."},
		{"broken JSON", `{"model":`, "The request body is empty or cut short; send a JSON object."},
		{"syntax", `{"model" "m"}`, "not valid JSON (at byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions", strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), tt.want) || strings.Contains(string(data), "Go ") || strings.Contains(string(data), "struct") {
				t.Errorf("%d %s, want 400 saying %q", resp.StatusCode, data, tt.want)
			}
		})
	}
}
