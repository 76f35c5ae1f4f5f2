package agent

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/observe"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Toolset is the set of tools a turn may call.
type Toolset interface {
	// Definitions lists the tools, sorted by name.
	Definitions() []*nanofleetv1.ToolDefinition
	// Call runs one tool call. Failures are results (is_error), never Go
	// errors, because the model must see them.
	Call(ctx context.Context, call *nanofleetv1.ToolCall) *nanofleetv1.ToolResult
}

// Hooks let the caller watch and persist a running turn. Any may be nil.
type Hooks struct {
	// Delta receives streamed answer text; when set the model is called
	// in streaming mode.
	Delta func(content string)
	// Progress receives text the model said alongside tool calls.
	Progress func(text string)
	// ToolHint receives a short description of each tool call, e.g.
	// "$ ls -la".
	ToolHint func(hint string)
	// Checkpoint receives the turn's messages after each step.
	Checkpoint func(ctx context.Context, msgs []*nanofleetv1.ChatMessage, iteration int) error
}

// Config is the loop's model settings.
type Config struct {
	MaxIterations int
	Temperature   float32
	MaxTokens     int
}

// Validate reports every invalid key, joined.
func (c Config) Validate() error {
	var p config.Problems
	if c.MaxIterations < 1 {
		p.Add("agents.defaults.maxToolIterations", "must be at least 1, got %d", c.MaxIterations)
	}
	if c.MaxTokens < 1 {
		p.Add("agents.defaults.maxTokens", "must be at least 1, got %d", c.MaxTokens)
	}
	return p.Err()
}

// Turn is the input of one run.
type Turn struct {
	Model string
	// Prompt is the system prompt followed by the history the model sees.
	Prompt []*nanofleetv1.ChatMessage
	// Messages of this turn so far: the user message, and when resuming,
	// the steps already taken.
	Messages []*nanofleetv1.ChatMessage
	// Iteration already spent (when resuming).
	Iteration int
	// TokenLimit bounds the tokens (prompt + completion) of the run's
	// model calls; 0: none. Once they are spent the model is called once
	// more without tools and told to answer, as when the iteration budget
	// is spent: the user's daily budget, checked before a turn, bounded
	// only the turns started, and one turn of 41 calls spent 45,100 tokens
	// of a 5,000-token budget.
	TokenLimit int
}

// Result is what a run produced.
type Result struct {
	// Messages of the turn: the input messages and every step added.
	Messages []*nanofleetv1.ChatMessage
	// Final is the answer text (the last assistant message).
	Final      string
	Iterations int
	// Forced reports that the budget ran out and the answer was forced.
	Forced bool
	// Usage sums the tokens of the run's model calls; ModelCalls counts
	// them and Model is the model that answered the last one.
	Usage      llm.Usage
	ModelCalls int
	Model      string
}

// Loop runs turns.
type Loop struct {
	model llm.Client
	cfg   Config
	log   *slog.Logger
}

// Option changes an optional setting of [New].
type Option func(*Loop)

// WithLogger sets the loop's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(lp *Loop) { lp.log = observe.OrDiscard(l) } }

// New returns a loop calling model.
func New(cfg Config, model llm.Client, opts ...Option) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Loop{model: model, cfg: cfg, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

// forceFinal is sent when the iteration budget is spent, forceFinalTokens
// when the token limit is.
const (
	forceFinal       = "You have used all tool iterations for this turn. Do not call tools. Answer the user now with what you have."
	forceFinalTokens = "You have used the tokens this turn may spend. Do not call tools. Answer the user now with what you have."
)

// Run runs the loop until a final answer, the budget, or ctx ends it.
func (l *Loop) Run(ctx context.Context, turn Turn, tools Toolset, hooks Hooks) (*Result, error) {
	res := &Result{Messages: append([]*nanofleetv1.ChatMessage(nil), turn.Messages...), Iterations: turn.Iteration}
	defs := tools.Definitions()
	known := make(map[string]*nanofleetv1.ToolDefinition, len(defs))
	for _, d := range defs {
		known[d.GetName()] = d
	}
	emptyRetries, lengthContinues := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		outOfTokens := turn.TokenLimit > 0 && res.Usage.PromptTokens+res.Usage.CompletionTokens >= turn.TokenLimit
		forced := res.Iterations >= l.cfg.MaxIterations || outOfTokens
		req := llm.Request{
			Model:       turn.Model,
			Messages:    append(append([]*nanofleetv1.ChatMessage(nil), turn.Prompt...), res.Messages...),
			Temperature: l.cfg.Temperature,
			MaxTokens:   l.cfg.MaxTokens,
		}
		if forced {
			note := forceFinal
			if outOfTokens {
				note = forceFinalTokens
			}
			req.Messages = append(req.Messages, &nanofleetv1.ChatMessage{Role: "user", Content: note})
		} else {
			req.Tools = defs
		}
		if hooks.Delta != nil {
			req.OnDelta = func(content, _ string) {
				if content != "" {
					hooks.Delta(content)
				}
			}
		}
		resp, err := l.model.Chat(ctx, req)
		if err != nil {
			return res, fmt.Errorf("%w: %w", ErrModel, err)
		}
		res.Usage = res.Usage.Add(resp.Usage)
		res.ModelCalls++
		if resp.Model != "" {
			res.Model = resp.Model
		}
		if forced && (len(resp.ToolCalls) > 0 || strings.TrimSpace(resp.Content) == "") {
			// The model would not stop: the user still gets an answer
			// saying so, with what the turn did.
			resp.Content = budgetSpent(resp.Content, res.Messages, l.cfg.MaxIterations)
			resp.ToolCalls = nil
		}
		msg := &nanofleetv1.ChatMessage{
			Role:             "assistant",
			Content:          resp.Content,
			ToolCalls:        resp.ToolCalls,
			ReasoningContent: resp.ReasoningContent,
			CreatedAt:        timestamppb.Now(),
		}
		if len(resp.ToolCalls) == 0 {
			switch {
			case strings.TrimSpace(resp.Content) == "" && emptyRetries < 1 && !forced:
				// Some models now and then answer nothing; ask once more.
				emptyRetries++
				continue
			case resp.FinishReason == "length" && lengthContinues < 2 && !forced:
				// Cut off by max tokens: keep what came and let it go on.
				lengthContinues++
				res.Messages = append(res.Messages, msg, &nanofleetv1.ChatMessage{Role: "user", Content: "Continue exactly where you stopped."})
				continue
			}
			res.Messages = append(res.Messages, msg)
			res.Final = joinContinued(res.Messages, lengthContinues)
			res.Forced = forced
			return res, nil
		}
		res.Iterations++
		res.Messages = append(res.Messages, msg)
		if hooks.Progress != nil && strings.TrimSpace(resp.Content) != "" {
			hooks.Progress(resp.Content)
		}
		results := l.runTools(ctx, resp.ToolCalls, known, tools, hooks)
		res.Messages = append(res.Messages, results...)
		if hooks.Checkpoint != nil {
			if err := hooks.Checkpoint(ctx, res.Messages, res.Iterations); err != nil {
				return res, fmt.Errorf("checkpoint: %w", err)
			}
		}
	}
}

// maxListed bounds the tool calls budgetSpent lists.
const maxListed = 10

// budgetSpent is the answer of a turn whose model still asked for tools
// after the iteration budget: what it said, that it ran out of steps, and
// the tool calls it made.
func budgetSpent(said string, msgs []*nanofleetv1.ChatMessage, budget int) string {
	var b strings.Builder
	if said = strings.TrimSpace(said); said != "" {
		b.WriteString(said + "\n\n")
	}
	fmt.Fprintf(&b, "I used all %d steps allowed for one turn and stopped before finishing.", budget)
	var done []string
	for _, m := range msgs {
		for _, c := range m.GetToolCalls() {
			done = append(done, Hint(c))
		}
	}
	if len(done) > 0 {
		b.WriteString(" What I did:")
		for _, h := range done[max(0, len(done)-maxListed):] {
			b.WriteString("\n- " + h)
		}
		if n := len(done) - maxListed; n > 0 {
			fmt.Fprintf(&b, "\n(and %d earlier)", n)
		}
	}
	b.WriteString("\n\nSay \"continue\" and I will go on from here.")
	return b.String()
}

// joinContinued glues an answer that was cut off and continued back into
// one text.
func joinContinued(msgs []*nanofleetv1.ChatMessage, continues int) string {
	last := msgs[len(msgs)-1].GetContent()
	if continues == 0 {
		return last
	}
	var parts []string
	for i := len(msgs) - 1; i >= 0 && len(parts) <= continues; i-- {
		if m := msgs[i]; m.GetRole() == "assistant" && len(m.GetToolCalls()) == 0 {
			parts = append([]string{m.GetContent()}, parts...)
		}
	}
	return strings.Join(parts, "")
}

// MaxParallelCalls bounds the read-only calls of one step that run at
// once. A tool runner runs a bounded number of calls for every session
// (tools.runner.maxConcurrent, 32): unbounded, one step's 100 web_fetch
// calls of a slow page, which a fetched page can ask a model for, held
// all 32 and another session's one fetch waited 72 s for a slot.
const MaxParallelCalls = 4

// runTools runs one step's calls: consecutive read-only calls together,
// at most MaxParallelCalls at once, everything else alone, results in the
// order of the calls.
func (l *Loop) runTools(ctx context.Context, calls []*nanofleetv1.ToolCall, known map[string]*nanofleetv1.ToolDefinition, tools Toolset, hooks Hooks) []*nanofleetv1.ChatMessage {
	out := make([]*nanofleetv1.ChatMessage, len(calls))
	run := func(i int) {
		c := calls[i]
		var r *nanofleetv1.ToolResult
		if _, ok := known[c.GetName()]; !ok {
			r = unknownTool(c, known)
		} else {
			if hooks.ToolHint != nil {
				hooks.ToolHint(Hint(c))
			}
			r = tools.Call(ctx, c)
		}
		out[i] = &nanofleetv1.ChatMessage{
			Role:       "tool",
			ToolCallId: c.GetId(),
			Name:       c.GetName(),
			Content:    r.GetContent(),
			Media:      r.GetMedia(),
			CreatedAt:  timestamppb.Now(),
		}
	}
	for i := 0; i < len(calls); {
		j := i
		for j < len(calls) && known[calls[j].GetName()].GetReadOnly() && !known[calls[j].GetName()].GetExclusive() {
			j++
		}
		if j-i > 1 {
			var wg sync.WaitGroup
			slots := make(chan struct{}, MaxParallelCalls)
			for k := i; k < j; k++ {
				slots <- struct{}{}
				wg.Add(1)
				go func() { defer wg.Done(); defer func() { <-slots }(); run(k) }()
			}
			wg.Wait()
			i = j
			continue
		}
		run(i)
		i++
	}
	return out
}

func unknownTool(c *nanofleetv1.ToolCall, known map[string]*nanofleetv1.ToolDefinition) *nanofleetv1.ToolResult {
	names := slices.Sorted(maps.Keys(known))
	return &nanofleetv1.ToolResult{
		CallId:    c.GetId(),
		IsError:   true,
		ErrorKind: nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_UNKNOWN_TOOL,
		Content:   fmt.Sprintf("Error: there is no tool %q. Available tools: %s.", c.GetName(), strings.Join(names, ", ")),
	}
}
