package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/openaiapi/openaiapitest"
)

// TestOpenAIAPIThroughTheFleet: an OpenAI client talks to the all-in-one's
// gateway; the turn runs on the real worker and the fake model.
func TestOpenAIAPIThroughTheFleet(t *testing.T) {
	llm := answering(t, "fleet says: ")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	client := apiClient(t, llm)
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

// TestTokenUsageThroughTheAPI: the model's usage of a turn comes back in
// the API's answer, and in the stream's last chunk when the client asks
// for it with stream_options.include_usage (issue 16.7). Each turn makes
// two model calls (a read_file, then the answer), so the usage is their
// sum.
func TestTokenUsageThroughTheAPI(t *testing.T) {
	llm := llmtest.NewServer(t)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		if r.LastMessage().Role != openai.ChatMessageRoleTool {
			return llmtest.ToolCalls(llmtest.Call("read_file", `{"path":"missing.txt"}`)).WithUsage(100, 10).WithTokenDetails(60, 0)
		}
		return llmtest.Text("done").WithUsage(130, 20).WithTokenDetails(100, 7)
	})
	want := openai.Usage{PromptTokens: 230, CompletionTokens: 30, TotalTokens: 260}
	const wantCached, wantReasoning = 160, 7

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	client := apiClient(t, llm)
	check := func(name string, u *openai.Usage) {
		t.Helper()
		if u == nil {
			t.Fatalf("%s: no usage", name)
		}
		if u.PromptTokens != want.PromptTokens || u.CompletionTokens != want.CompletionTokens || u.TotalTokens != want.TotalTokens {
			t.Errorf("%s: usage %d/%d/%d, want %d/%d/%d", name, u.PromptTokens, u.CompletionTokens, u.TotalTokens,
				want.PromptTokens, want.CompletionTokens, want.TotalTokens)
		}
		if u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens != wantCached {
			t.Errorf("%s: cached tokens %+v, want %d", name, u.PromptTokensDetails, wantCached)
		}
		if u.CompletionTokensDetails == nil || u.CompletionTokensDetails.ReasoningTokens != wantReasoning {
			t.Errorf("%s: reasoning tokens %+v, want %d", name, u.CompletionTokensDetails, wantReasoning)
		}
	}

	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model: "nanofleet", User: "usage-1",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "count me"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	check("completion", &resp.Usage)

	tests := []struct {
		name      string
		options   *openai.StreamOptions
		wantUsage bool
	}{
		{"stream without include_usage", nil, false},
		{"stream with include_usage", &openai.StreamOptions{IncludeUsage: true}, true},
	}
	for _, tt := range tests {
		stream, err := client.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{
			Model: "nanofleet", User: "usage-2", Stream: true, StreamOptions: tt.options,
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "count me too"}},
		})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var usage *openai.Usage
		var text strings.Builder
		for {
			c, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if c.Usage != nil {
				if len(c.Choices) != 0 {
					t.Errorf("%s: the usage chunk has choices", tt.name)
				}
				usage = c.Usage
			}
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
			}
		}
		stream.Close()
		if text.String() != "done" {
			t.Errorf("%s: streamed %q", tt.name, text.String())
		}
		if !tt.wantUsage {
			if usage != nil {
				t.Errorf("%s: usage chunk %+v not asked for", tt.name, usage)
			}
			continue
		}
		check(tt.name, usage)
	}
}

// usageProgram streams one answer with the npm openai client, asking for
// the usage chunk, and prints the usage of the answer and of the stream.
const usageProgram = `
const OpenAI = require(process.env.OPENAI_MODULE);
const client = new OpenAI({apiKey: process.env.API_KEY, baseURL: process.env.BASE_URL});
(async () => {
  const r = await client.chat.completions.create({model: 'nanofleet', user: 'node-usage', messages: [{role: 'user', content: 'count'}]});
  const stream = await client.chat.completions.create({model: 'nanofleet', user: 'node-usage', stream: true,
    stream_options: {include_usage: true}, messages: [{role: 'user', content: 'count again'}]});
  let usage = null;
  for await (const c of stream) { if (c.usage) usage = c.usage; }
  console.log(JSON.stringify([r.usage, usage]));
})().catch(e => { console.error(String(e)); process.exit(1); });
`

// TestTokenUsageNodeSDK: the official npm openai client reads the usage
// of a completion and of a stream's last chunk (issue 16.7).
func TestTokenUsageNodeSDK(t *testing.T) {
	sdk := openaiapitest.NodeSDK(t)
	llm := llmtest.NewServer(t)
	llm.Handle(func(*llmtest.RecordedRequest) llmtest.Reply {
		return llmtest.Text("counted").WithUsage(70, 7).WithTokenDetails(30, 2)
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	base, key := startWithAPI(t, llm)
	out := sdk.Run(ctx, t, usageProgram, key, base)
	var got []struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got) != 2 {
		t.Fatalf("node printed %s (%v)", out, err)
	}
	for i, u := range got {
		if u.PromptTokens != 70 || u.CompletionTokens != 7 || u.TotalTokens != 77 ||
			u.PromptTokensDetails.CachedTokens != 30 || u.CompletionTokensDetails.ReasoningTokens != 2 {
			t.Errorf("usage %d (%s): %+v", i, []string{"completion", "stream"}[i], u)
		}
	}
}

// apiClient runs the all-in-one with the gateway and returns an OpenAI
// client of the API it announced.
func apiClient(t *testing.T, llm *llmtest.Server) *openai.Client {
	t.Helper()
	base, key := startWithAPI(t, llm)
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = base
	return openai.NewClientWithConfig(cfg)
}

// startWithAPI runs the all-in-one with the gateway and returns the base
// URL and key of the OpenAI-compatible API it announced.
func startWithAPI(t *testing.T, llm *llmtest.Server) (base, key string) {
	t.Helper()
	f := startAPIFleet(t, llm, t.TempDir(), 0)
	return f.base, f.key
}
