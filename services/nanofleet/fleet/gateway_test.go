package fleet_test

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// TestOpenAIAPIThroughTheFleet: an OpenAI client talks to the all-in-one's
// gateway; the turn runs on the real worker and the fake model.
func TestOpenAIAPIThroughTheFleet(t *testing.T) {
	llm := llmtest.NewServer(t)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply { return llmtest.Text("fleet says: " + r.LastUserText()) })
	var mu sync.Mutex
	var lines []string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := listenAddr(t)
	f, err := fleet.Start(ctx, fleet.Options{
		File: loadConfig(t, testConfig(t, llm.URL(), nil)), Getenv: func(string) string { return "" },
		Log:     slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		DataDir: t.TempDir(), Workspace: t.TempDir(), Gateway: true, GatewayListen: port,
		Announce: func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	mu.Lock()
	all := strings.Join(lines, "\n")
	mu.Unlock()
	m := regexp.MustCompile(`API: (\S+) \(api key (\S+)\)`).FindStringSubmatch(all)
	if m == nil {
		t.Fatalf("no API announcement in %q", all)
	}
	cfg := openai.DefaultConfig(m[2])
	cfg.BaseURL = m[1]
	client := openai.NewClientWithConfig(cfg)
	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model:    "nanofleet",
		User:     "api-user-1",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hello gateway"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "fleet says: hello gateway" {
		t.Fatalf("answer = %q", got)
	}
}
