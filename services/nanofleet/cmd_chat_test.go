package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/syncbuf"
)

// chatWithHeldTurn starts chat with a model that holds its answer to
// "long job" (released when the test ends) and echoes anything else, and
// returns what to type into, stdout, stderr, the command's end, and how
// to interrupt it (Ctrl-C).
func chatWithHeldTurn(t *testing.T) (typed io.WriteCloser, stdout, stderr *syncbuf.Buffer, done <-chan error, interrupt func()) {
	t.Helper()
	stdin, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	held, stdout, stderr, done, interrupt := startChat(t, stdin)
	fmt.Fprintln(w, "long job")
	bustest.Receive(t, held.Asked, time.Minute) // the turn reached the model
	return w, stdout, stderr, done, interrupt
}

// startChat starts chat reading stdin, with a model that holds its answer
// to "long job" (released when the test ends) and echoes anything else.
func startChat(t *testing.T, stdin io.Reader) (held *llmtest.Held, stdout, stderr *syncbuf.Buffer, done <-chan error, interrupt func()) {
	t.Helper()
	return startCommand(t, stdin, "chat")
}

// startCommand is startChat with the command line args.
func startCommand(t *testing.T, stdin io.Reader, args ...string) (held *llmtest.Held, stdout, stderr *syncbuf.Buffer, done <-chan error, interrupt func()) {
	t.Helper()
	held = llmtest.Hold("long job", llmtest.Text("late answer"), llmtest.Echo)
	llm := llmtest.NewServer(t)
	llm.Handle(held.Script)
	t.Cleanup(held.Release) // before the server's close, which waits for it
	env, _, _ := testEnv(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "k"})
	stdout, stderr = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	env.stdin, env.stdout, env.stderr = stdin, stdout, stderr
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	ended := make(chan error, 1)
	go func() { ended <- dispatch(ctx, env, args) }()
	return held, stdout, stderr, ended, cancel
}

// shows waits until b holds s.
func shows(t *testing.T, b *syncbuf.Buffer, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := b.Await(ctx, s); err != nil {
		t.Fatalf("no %q in %q: %v", s, b.String(), err)
	}
}

// TestChatStopsTheRunningTurn: /stop typed while a turn runs reaches the
// fleet at once and stops it, as on every channel; chat read it only once
// the turn it was meant to stop had ended (here: never, until the model
// answered a minute later). A line typed meanwhile is sent after.
func TestChatStopsTheRunningTurn(t *testing.T) {
	typed, stdout, _, done, _ := chatWithHeldTurn(t)
	fmt.Fprintln(typed, "/stop")
	fmt.Fprintln(typed, "after")
	shows(t, stdout, "⏹ Stopped.")
	shows(t, stdout, "No turn is running now")
	shows(t, stdout, "echo: after")
	typed.Close()
	if err := bustest.Receive(t, done, time.Minute); err != nil {
		t.Errorf("chat: %v", err)
	}
	if strings.Contains(stdout.String(), "late answer") {
		t.Errorf("the stopped turn answered:\n%s", stdout)
	}
	if i, j := strings.Index(stdout.String(), "⏹ Stopped."), strings.Index(stdout.String(), "echo: after"); i > j {
		t.Errorf("the line typed during the turn was answered before the stop:\n%s", stdout)
	}
}

// TestAgentWithoutMessageChats: `agent` without -m is an interactive
// chat, as nanobot's agent is; it refused, asking for -m.
func TestAgentWithoutMessageChats(t *testing.T) {
	_, stdout, _, done, _ := startCommand(t, strings.NewReader("first\nsecond\n/exit\n"), "agent", "--session", "cli:mine")
	if err := bustest.Receive(t, done, 2*time.Minute); err != nil {
		t.Fatalf("agent: %v", err)
	}
	got := stdout.String()
	if !strings.Contains(got, "session cli:mine") || strings.Index(got, "echo: first") > strings.Index(got, "echo: second") || !strings.Contains(got, "echo: first") {
		t.Errorf("want a chat in cli:mine answering both lines in order; agent printed:\n%s", got)
	}
}

// TestChatStopsATurnPastedWithIt: lines pasted at once, a /stop right
// after the line it stops. The /stop went out before that line (sent on a
// goroutine of its own), was answered "No turn is running now", and the
// turn ran to its end.
func TestChatStopsATurnPastedWithIt(t *testing.T) {
	_, stdout, _, done, _ := startChat(t, strings.NewReader("long job\n/stop\nafter\n"))
	if err := bustest.Receive(t, done, 2*time.Minute); err != nil {
		t.Fatalf("chat: %v", err)
	}
	got := stdout.String()
	stopped, noTurn, after := strings.Index(got, "⏹ Stopped.\n"), strings.Index(got, "No turn is running now"), strings.Index(got, "echo: after")
	if stopped < 0 || noTurn < stopped || after < noTurn || strings.Contains(got, "late answer") {
		t.Errorf("want the turn stopped, the /stop answered, then the next line; chat printed:\n%s", got)
	}
}

// TestChatInterruptedDuringATurn: Ctrl-C while a turn runs ends chat as it
// ends every command (interrupted, exit code 130), saying that the turn
// goes on and where its answer will be; it ended silently with 0.
func TestChatInterruptedDuringATurn(t *testing.T) {
	_, _, stderr, done, interrupt := chatWithHeldTurn(t)
	interrupt()
	if err := bustest.Receive(t, done, time.Minute); !errors.Is(err, errInterrupted) {
		t.Errorf("chat interrupted during a turn: %v, want errInterrupted", err)
	}
	if !strings.Contains(stderr.String(), "/history") {
		t.Errorf("stderr does not say where the answer will be: %q", stderr)
	}
}
