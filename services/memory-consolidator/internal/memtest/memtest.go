// Package memtest is the memory-consolidator's test kit: a provisioned
// JetStream, a model client on the fake OpenAI server with a scripted
// consolidation model, and waits on JetStream events.
package memtest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	"github.com/nanofleet/nanofleet/pkg/usage"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Start starts JetStream with the fleet's, memory's and the usage
// bucket's layout.
func Start(t testing.TB) (*bustest.Server, *bus.Bus) {
	t.Helper()
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "")
	Provision(t, b)
	return srv, b
}

// Provision provisions what a consolidator uses on b: the memory streams
// and the usage bucket.
func Provision(t testing.TB, b *bus.Bus) {
	t.Helper()
	if err := bus.Provision(t.Context(), b, bustest.TestLayout(), memory.Assets, usage.Assets); err != nil {
		t.Fatal(err)
	}
}

// Model returns a client of srv that retries at most once, without
// waiting.
func Model(t testing.TB, srv *llmtest.Server) llm.Client {
	t.Helper()
	m, err := llm.New(llm.Config{Name: "openai", APIBase: srv.URL(), APIKey: "k", Model: "test-model", MaxRetries: 1},
		llm.WithSleep(func(context.Context, time.Duration) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Logger logs to the test.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(writer{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type writer struct{ t testing.TB }

func (w writer) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// IsConsolidation reports whether req is a consolidation request.
func IsConsolidation(req *llmtest.RecordedRequest) bool {
	return len(req.Messages) > 0 && strings.Contains(req.Messages[0].Content, "memory consolidation agent")
}

// IsDream reports whether req is a Dream request.
func IsDream(req *llmtest.RecordedRequest) bool {
	return len(req.Messages) > 0 && strings.Contains(req.Messages[0].Content, "You are Dream")
}

// Consolidate is a consolidation model that calls save_memory as told: the
// history entry quotes every user line of the conversation, and every
// "FACT: x." of a user line becomes a "- x" line of the memory. Asked for
// several labelled conversations (save_memories), it answers an entry per
// conversation likewise and one memory with the facts of them all.
func Consolidate(req *llmtest.RecordedRequest) llmtest.Reply {
	u := req.LastUserText()
	mem := Between(u, "## Current Long-term Memory\n", "\n\n## Conversation")
	if mem == "(empty)" {
		mem = ""
	}
	lines := strings.Split(strings.TrimSpace(mem), "\n")
	if mem == "" {
		lines = nil
	}
	if _, convs, batch := strings.Cut(u, "## Conversations to Process\n"); batch {
		type entry struct {
			Conversation string `json:"conversation"`
			HistoryEntry string `json:"history_entry"`
		}
		var entries []entry
		for _, section := range strings.Split(convs, "\n### Conversation ")[1:] {
			label, conv, _ := strings.Cut(section, "\n")
			var users []string
			users, lines = learn(conv, lines)
			entries = append(entries, entry{label, "[2026-01-01 00:00] The user said: " + strings.Join(users, " | ")})
		}
		out, _ := json.Marshal(map[string]any{"history_entries": entries, "memory_update": strings.Join(lines, "\n")})
		return llmtest.ToolCalls(llmtest.Call("save_memories", string(out)))
	}
	_, conv, _ := strings.Cut(u, "## Conversation to Process\n")
	users, lines := learn(conv, lines)
	out, _ := json.Marshal(map[string]string{
		"history_entry": "[2026-01-01 00:00] The user said: " + strings.Join(users, " | "),
		"memory_update": strings.Join(lines, "\n"),
	})
	return llmtest.ToolCalls(llmtest.Call("save_memory", string(out)))
}

// learn returns the user lines of a transcript, and lines with a "- x"
// added for each "FACT: x." of theirs it lacked.
func learn(conv string, lines []string) ([]string, []string) {
	var users []string
	for l := range strings.SplitSeq(conv, "\n") {
		_, text, ok := strings.Cut(l, "USER: ")
		if !ok {
			continue
		}
		users = append(users, text)
		for _, part := range strings.Split(text, "FACT: ")[1:] {
			fact := "- " + strings.TrimSpace(strings.SplitN(part, ".", 2)[0])
			if !slices.Contains(lines, fact) {
				lines = append(lines, fact)
			}
		}
	}
	return users, lines
}

// Between returns the text of s between the markers.
func Between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	rest, _, _ = strings.Cut(rest, to)
	return rest
}

// WaitCursor waits until the session's consolidation cursor reaches seq,
// watching the sessions bucket.
func WaitCursor(t testing.TB, b *bus.Bus, sessionKey string, seq uint64, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	kv, err := b.KV(ctx, bus.BucketSessions)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, subject.Token(sessionKey))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	var last uint64
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				continue
			}
			info := &nanofleetv1.SessionInfo{}
			if proto.Unmarshal(e.Value(), info) == nil {
				last = info.GetConsolidatedSeq()
				if last >= seq {
					return
				}
			}
		case <-ctx.Done():
			t.Fatalf("cursor of %s at %d, not %d, after %s", sessionKey, last, seq, within)
		}
	}
}

// Messages delivers a stream's messages on filter, from its first one.
func Messages(t testing.TB, b *bus.Bus, stream, filter string) <-chan jetstream.Msg {
	t.Helper()
	ctx := t.Context()
	ch := make(chan jetstream.Msg, 1000)
	c, err := b.JS.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) { ch <- m })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return ch
}

// Next returns the next message of ch or fails after within.
func Next(t testing.TB, ch <-chan jetstream.Msg, within time.Duration, what string) jetstream.Msg {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(within):
		t.Fatalf("no %s within %s", what, within)
		return nil
	}
}

// Coverage checks that the session's history entries cover disjoint
// ranges, and returns them.
func Coverage(t testing.TB, b *bus.Bus, sessionKey string) []memory.Entry {
	t.Helper()
	entries, err := memory.OpenLog(b).Session(t.Context(), sessionKey)
	if err != nil {
		t.Fatal(err)
	}
	var prevTo uint64
	for _, e := range entries {
		if e.GetFromSeq() <= prevTo || e.GetToSeq() < e.GetFromSeq() {
			t.Errorf("entry %d covers %d-%d, overlapping the one before (to %d)", e.Seq, e.GetFromSeq(), e.GetToSeq(), prevTo)
		}
		prevTo = e.GetToSeq()
	}
	return entries
}

// Count returns how often sub occurs in the entries' texts.
func Count(entries []memory.Entry, sub string) int {
	n := 0
	for _, e := range entries {
		n += strings.Count(e.GetText(), sub)
	}
	return n
}

// Describe lists entries for failure messages.
func Describe(entries []memory.Entry) string {
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "#%d %s %d-%d raw=%v: %s\n", e.Seq, e.GetScope(), e.GetFromSeq(), e.GetToSeq(), e.GetRaw(), textcut.Clip(e.GetText(), 300))
	}
	return b.String()
}

// Chain wraps a consolidation script and records, call by call, the
// memory each call was shown and the memory it answered: a call that was
// not shown what the call before answered saw a stale document (a lost
// update), unless something else wrote in between.
type Chain struct {
	script llmtest.Script
	mu     sync.Mutex
	last   string
	calls  int
	breaks []string
}

// NewChain returns a Chain around script.
func NewChain(script llmtest.Script) *Chain { return &Chain{script: script} }

// Script answers req with the wrapped script and records the link.
func (c *Chain) Script(req *llmtest.RecordedRequest) llmtest.Reply {
	reply := c.script(req)
	shown := Between(req.LastUserText(), "## Current Long-term Memory\n", "\n\n## Conversation")
	if shown == "(empty)" {
		shown = ""
	}
	var args struct {
		MemoryUpdate string `json:"memory_update"`
	}
	if len(reply.ToolCalls) > 0 {
		_ = json.Unmarshal([]byte(reply.ToolCalls[0].Arguments), &args)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if shown != c.last {
		c.breaks = append(c.breaks, fmt.Sprintf("call %d was shown\n%s\nbut the call before answered\n%s", c.calls, shown, c.last))
	}
	c.last = args.MemoryUpdate
	return reply
}

// Breaks returns the calls that were not shown the memory the call
// before answered.
func (c *Chain) Breaks() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.breaks)
}
