package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// stream makes a streaming call and assembles the full response. Once
// onDelta has been called, a failure is reported as ErrStreamInterrupted.
func (p *Provider) stream(ctx context.Context, creq openai.ChatCompletionRequest,
	onDelta func(content, reasoning string),
) (*Response, error) {
	st, err := p.client.CreateChatCompletionStream(ctx, creq)
	if err != nil {
		return nil, err
	}
	defer st.Close()

	var acc streamAccumulator
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if acc.emitted {
				return nil, fmt.Errorf("%w: %w", ErrStreamInterrupted, err)
			}
			return nil, err
		}
		if content, reasoning := acc.add(&chunk); content != "" || reasoning != "" {
			acc.emitted = true
			onDelta(content, reasoning)
		}
	}
	if !acc.sawChoice {
		return nil, ErrNoChoices
	}
	if acc.finish == "" {
		// go-openai reads a body that ends without [DONE] as the end of
		// the stream: a connection cut by a proxy, the provider or our own
		// deadline would pass for a whole answer. Every chat completions
		// stream ends its choice with a finish reason; one without was cut.
		err := cmp.Or(ctx.Err(), io.ErrUnexpectedEOF)
		if acc.emitted {
			return nil, fmt.Errorf("%w: %w", ErrStreamInterrupted, err)
		}
		return nil, err
	}
	return acc.response(), nil
}

// streamAccumulator assembles chunks of the first choice.
type streamAccumulator struct {
	content   strings.Builder
	reasoning strings.Builder
	calls     []*callAcc // in order of first appearance
	finish    string
	usage     Usage
	model     string
	sawChoice bool
	emitted   bool
}

type callAcc struct {
	index int
	id    string
	name  string
	args  strings.Builder
}

// add folds one chunk in and returns its text deltas.
func (a *streamAccumulator) add(c *openai.ChatCompletionStreamResponse) (content, reasoning string) {
	if c.Model != "" {
		a.model = c.Model
	}
	if c.Usage != nil {
		a.usage = usageFrom(*c.Usage)
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		a.sawChoice = true
		if ch.FinishReason != "" && ch.FinishReason != openai.FinishReasonNull {
			a.finish = string(ch.FinishReason)
		}
		d := &ch.Delta
		a.content.WriteString(d.Content)
		a.reasoning.WriteString(d.ReasoningContent)
		content += d.Content
		reasoning += d.ReasoningContent
		for j := range d.ToolCalls {
			a.addCall(&d.ToolCalls[j])
		}
	}
	return content, reasoning
}

// addCall merges a tool call fragment into the call with the same index.
// Fragments without an index (some hosts omit it) start a new call when they
// bring a new id and continue the last call otherwise.
func (a *streamAccumulator) addCall(tc *openai.ToolCall) {
	var call *callAcc
	if tc.Index != nil {
		for _, c := range a.calls {
			if c.index == *tc.Index {
				call = c
				break
			}
		}
		if call == nil {
			call = &callAcc{index: *tc.Index}
			a.calls = append(a.calls, call)
		}
	} else {
		if n := len(a.calls); n > 0 && (tc.ID == "" || tc.ID == a.calls[n-1].id) {
			call = a.calls[n-1]
		} else {
			call = &callAcc{index: -1 - n}
			a.calls = append(a.calls, call)
		}
	}
	if tc.ID != "" {
		call.id = tc.ID
	}
	if tc.Function.Name != "" {
		call.name = tc.Function.Name
	}
	call.args.WriteString(tc.Function.Arguments)
}

func (a *streamAccumulator) response() *Response {
	var calls []*nanofleetv1.ToolCall
	for _, c := range a.calls {
		calls = append(calls, newToolCall(c.id, c.name, c.args.String()))
	}
	return &Response{
		Content:          a.content.String(),
		ReasoningContent: a.reasoning.String(),
		ToolCalls:        calls,
		FinishReason:     a.finish,
		Usage:            a.usage,
		Model:            a.model,
	}
}
