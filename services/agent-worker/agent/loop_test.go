package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/agent"
)

// funcTools is a toolset whose tools are Go functions.
type funcTools struct {
	defs []*nanofleetv1.ToolDefinition
	fn   func(ctx context.Context, c *nanofleetv1.ToolCall) string
}

func (f *funcTools) Definitions() []*nanofleetv1.ToolDefinition { return f.defs }
func (f *funcTools) Call(ctx context.Context, c *nanofleetv1.ToolCall) *nanofleetv1.ToolResult {
	return &nanofleetv1.ToolResult{CallId: c.GetId(), Content: f.fn(ctx, c)}
}

func newLoop(t *testing.T, srv *llmtest.Server, maxIter int) *agent.Loop {
	t.Helper()
	p, err := llm.New(llm.Config{Name: "openai", APIBase: srv.URL(), APIKey: "k", Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	l, err := agent.New(agent.Config{MaxIterations: maxIter, MaxTokens: 100}, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func userTurn(text string) agent.Turn {
	return agent.Turn{
		Model:    "m",
		Prompt:   []*nanofleetv1.ChatMessage{{Role: "system", Content: "sys"}},
		Messages: []*nanofleetv1.ChatMessage{{Role: "user", Content: text}},
	}
}

var tools = &funcTools{
	defs: []*nanofleetv1.ToolDefinition{
		{Name: "read_file", ReadOnly: true, ParametersJson: `{"type":"object"}`},
		{Name: "write_file", ParametersJson: `{"type":"object"}`},
	},
	fn: func(_ context.Context, c *nanofleetv1.ToolCall) string { return "ok " + c.GetName() },
}

func TestTextAnswer(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Text("hello"))
	res, err := newLoop(t, srv, 5).Run(t.Context(), userTurn("hi"), tools, agent.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Final != "hello" || len(res.Messages) != 2 || res.Iterations != 0 {
		t.Fatalf("result = %+v", res)
	}
	req, _ := srv.LastRequest()
	if got := req.ToolNames(); strings.Join(got, ",") != "read_file,write_file" {
		t.Errorf("tools sent = %v", got)
	}
}

func TestToolStepsAndCheckpoints(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(
		llmtest.ToolCalls(llmtest.Call("write_file", `{"path":"a"}`)).WithContent("writing"),
		llmtest.ToolCalls(llmtest.Call("nope", `{}`)),
		llmtest.Text("done"),
	)
	var hints, progress []string
	checkpoints := 0
	res, err := newLoop(t, srv, 5).Run(t.Context(), userTurn("go"), tools, agent.Hooks{
		ToolHint:   func(h string) { hints = append(hints, h) },
		Progress:   func(p string) { progress = append(progress, p) },
		Checkpoint: func(context.Context, []*nanofleetv1.ChatMessage, int) error { checkpoints++; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Final != "done" || res.Iterations != 2 || checkpoints != 2 {
		t.Fatalf("final %q, iterations %d, checkpoints %d", res.Final, res.Iterations, checkpoints)
	}
	// user, assistant(write), tool, assistant(nope), tool, assistant(done)
	if len(res.Messages) != 6 {
		t.Fatalf("%d messages", len(res.Messages))
	}
	if got := res.Messages[2].GetContent(); got != "ok write_file" {
		t.Errorf("tool result = %q", got)
	}
	if got := res.Messages[4].GetContent(); !strings.Contains(got, `no tool "nope"`) || !strings.Contains(got, "read_file, write_file") {
		t.Errorf("unknown tool answer = %q", got)
	}
	if len(hints) != 1 || hints[0] != "write a" || len(progress) != 1 || progress[0] != "writing" {
		t.Errorf("hints %v, progress %v", hints, progress)
	}
}

func TestBudgetForcesFinalAnswer(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		if len(r.Tools) == 0 {
			return llmtest.Text("best effort")
		}
		return llmtest.ToolCalls(llmtest.Call("read_file", `{"path":"x"}`))
	})
	res, err := newLoop(t, srv, 3).Run(t.Context(), userTurn("loop"), tools, agent.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Forced || res.Final != "best effort" || res.Iterations != 3 {
		t.Fatalf("forced %v, final %q, iterations %d", res.Forced, res.Final, res.Iterations)
	}
	if n := srv.RequestCount(); n != 4 {
		t.Errorf("%d model calls, want 3 with tools + 1 forced", n)
	}
}

func TestReadOnlyCallsRunTogether(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(
		llmtest.ToolCalls(llmtest.Call("read_file", `{"path":"1"}`), llmtest.Call("read_file", `{"path":"2"}`)),
		llmtest.Text("ok"),
	)
	var mu sync.Mutex
	started := 0
	both := make(chan struct{})
	ts := &funcTools{defs: tools.defs, fn: func(ctx context.Context, c *nanofleetv1.ToolCall) string {
		mu.Lock()
		started++
		if started == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
			return "together"
		case <-time.After(5 * time.Second):
			return "alone"
		}
	}}
	res, err := newLoop(t, srv, 5).Run(t.Context(), userTurn("read"), ts, agent.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Messages[2:4] {
		if m.GetContent() != "together" {
			t.Errorf("read-only calls ran one after another: %q", m.GetContent())
		}
	}
}

// One step's read-only calls run together, but no more than
// MaxParallelCalls at once: a tool runner's slots are every session's.
func TestReadOnlyCallsAreBounded(t *testing.T) {
	srv := llmtest.NewServer(t)
	const n = 12
	var calls []llmtest.ToolCall
	for i := range n {
		calls = append(calls, llmtest.Call("read_file", fmt.Sprintf(`{"path":"%d"}`, i)))
	}
	srv.Enqueue(llmtest.ToolCalls(calls...), llmtest.Text("ok"))
	started := make(chan struct{}, n)
	release := make(chan struct{}, n)
	// The most calls that ran at once: a call over the bound would count
	// whenever it started, with no wait for it to show.
	var running, most atomic.Int32
	ts := &funcTools{defs: tools.defs, fn: func(ctx context.Context, c *nanofleetv1.ToolCall) string {
		now := running.Add(1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		running.Add(-1)
		return c.GetArgumentsJson()
	}}
	type result struct {
		res *agent.Result
		err error
	}
	done := make(chan result, 1)
	loop := newLoop(t, srv, 5) // here: it may call t.Fatal
	go func() {
		res, err := loop.Run(t.Context(), userTurn("read"), ts, agent.Hooks{})
		done <- result{res, err}
	}()
	// Each wave: MaxParallelCalls start together, and no more until one
	// of them is done.
	for left := n; left > 0; left -= agent.MaxParallelCalls {
		for range min(left, agent.MaxParallelCalls) {
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the calls did not run side by side")
			}
		}
		for range min(left, agent.MaxParallelCalls) {
			release <- struct{}{}
		}
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn did not end")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if m := most.Load(); m != agent.MaxParallelCalls {
		t.Errorf("%d read-only calls ran at once, want %d", m, agent.MaxParallelCalls)
	}
	for i, m := range r.res.Messages[2 : 2+n] {
		if want := fmt.Sprintf(`{"path":"%d"}`, i); m.GetContent() != want {
			t.Errorf("result %d = %q, want %q", i, m.GetContent(), want)
		}
	}
}

func TestEmptyReplyIsRetried(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Text(""), llmtest.Text("second try"))
	res, err := newLoop(t, srv, 5).Run(t.Context(), userTurn("hi"), tools, agent.Hooks{})
	if err != nil || res.Final != "second try" {
		t.Fatalf("final %q, %v", res.Final, err)
	}
}

func TestLengthCutOffContinues(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Text("first half, ").WithFinishReason("length"), llmtest.Text("second half"))
	res, err := newLoop(t, srv, 5).Run(t.Context(), userTurn("long"), tools, agent.Hooks{})
	if err != nil || res.Final != "first half, second half" {
		t.Fatalf("final %q, %v", res.Final, err)
	}
}

func TestModelFailureIsErrModel(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Fail(500, ""))
	_, err := newLoop(t, srv, 5).Run(t.Context(), userTurn("hi"), tools, agent.Hooks{})
	if !errors.Is(err, agent.ErrModel) {
		t.Fatalf("err = %v, want ErrModel", err)
	}
}

func TestStreamingDeltas(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Text("streamed answer"))
	var got strings.Builder
	res, err := newLoop(t, srv, 5).Run(t.Context(), userTurn("hi"), tools, agent.Hooks{Delta: func(s string) { got.WriteString(s) }})
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != "streamed answer" || res.Final != "streamed answer" {
		t.Errorf("deltas %q, final %q", got.String(), res.Final)
	}
}

func TestHint(t *testing.T) {
	tests := []struct{ name, args, want string }{
		{"exec", `{"command":"ls -la"}`, "$ ls -la"},
		{"read_file", `{"path":"src/main.go"}`, "read src/main.go"},
		{"cron", `{"action":"list"}`, `cron({"action":"list"})`},
		// Cut at 80 and 60 bytes, which fall inside a character: the cut
		// moves back to the character's start.
		{"exec", `{"command":"echo a` + strings.Repeat("你", 30) + `"}`, "$ echo a" + strings.Repeat("你", 24) + "…"},
		{"cron", `{"q":"` + strings.Repeat("😀", 20) + `"}`, `cron({"q":"` + strings.Repeat("😀", 13) + "…)"},
		{"read_file", `{"path":"` + strings.Repeat("文", 27) + `"}`, "read " + strings.Repeat("文", 26) + "…"},
	}
	for _, tt := range tests {
		if got := agent.Hint(&nanofleetv1.ToolCall{Name: tt.name, ArgumentsJson: tt.args}); got != tt.want {
			t.Errorf("Hint(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestForcedFinalNeverEmpty(t *testing.T) {
	tests := []struct {
		name   string
		forced llmtest.Reply
		want   []string
	}{
		{"tool calls again", llmtest.ToolCalls(llmtest.Call("read_file", `{"path":"y"}`)),
			[]string{"used all 2 steps", "- read x", "continue"}},
		{"tool calls with text", llmtest.ToolCalls(llmtest.Call("read_file", `{"path":"y"}`)).WithContent("Found half of it."),
			[]string{"Found half of it.", "used all 2 steps", "- read x"}},
		{"empty", llmtest.Text(""), []string{"used all 2 steps", "- read x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewServer(t)
			srv.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
				if len(r.Tools) == 0 {
					return tt.forced
				}
				return llmtest.ToolCalls(llmtest.Call("read_file", `{"path":"x"}`))
			})
			res, err := newLoop(t, srv, 2).Run(t.Context(), userTurn("loop"), tools, agent.Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Forced {
				t.Error("not forced")
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Final, w) {
					t.Errorf("final %q lacks %q", res.Final, w)
				}
			}
			if last := res.Messages[len(res.Messages)-1]; len(last.GetToolCalls()) != 0 || last.GetContent() != res.Final {
				t.Errorf("last message %+v is not the final answer", last)
			}
		})
	}
}
