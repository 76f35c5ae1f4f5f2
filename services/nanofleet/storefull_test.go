package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/storeguard/storeguardtest"
	"github.com/nanofleet/nanofleet/pkg/syncbuf"
)

// TestConversationSaysWhenTheStoreFills: a chat with a fleet of its own
// whose store fills while a turn runs says so, and that the turn goes on
// once space is freed, instead of waiting without a word (the API answers
// 507 then; the CLI was silent), then prints the answer. A message typed
// while the store is short of its reserve is refused at once, saying why;
// `agent -m` on such a store fails to start its fleet naming the disk.
func TestConversationSaysWhenTheStoreFills(t *testing.T) {
	// 128 MiB: the default reserve is 32 MiB and the store recovers at
	// twice that free.
	dataDir := storeguardtest.SmallFS(t, "128m")
	asked, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	llm := llmtest.NewServer(t)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		if r.LastUserText() == "in flight" {
			once.Do(func() { close(asked) })
			select {
			case <-proceed:
			case <-time.After(time.Minute):
			}
			return llmtest.Text("late answer")
		}
		return llmtest.Text("ok: " + r.LastUserText())
	})
	env, _, _ := testEnv(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "k"})
	stdin, typed := io.Pipe()
	stdout, errOut := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	env.stdin, env.stdout, env.stderr = stdin, stdout, errOut
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- dispatch(ctx, env, []string{"chat", "--data", dataDir}) }()
	shows := func(b *syncbuf.Buffer, s string) {
		t.Helper()
		bustest.Eventually(t, 30*time.Second, func() error {
			if !strings.Contains(b.String(), s) {
				return fmt.Errorf("no %q in %q", s, b.String())
			}
			return nil
		})
	}
	fmt.Fprintln(typed, "in flight")
	select {
	case <-asked:
	case <-time.After(time.Minute):
		t.Fatal("the turn never reached the model")
	}
	ballast := filepath.Join(dataDir, "ballast")
	storeguardtest.Fill(t, ballast)
	shows(errOut, "storage full")
	shows(errOut, "the turn goes on then")
	close(proceed)
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	shows(errOut, "the store has room again")
	shows(stdout, "late answer")

	storeguardtest.FillTo(t, ballast, 16<<20)
	// The guard looks once a second and logs what it sees.
	const seen = "new messages are refused until space is freed"
	bustest.Eventually(t, 30*time.Second, func() error {
		if n := strings.Count(errOut.String(), seen); n != 2 {
			return fmt.Errorf("%d of %q in %q, want 2", n, seen, errOut.String())
		}
		return nil
	})
	fmt.Fprintln(typed, "while full")
	shows(errOut, "error: the message was not sent: storage full")
	for _, r := range llm.Requests() {
		if r.LastUserText() == "while full" {
			t.Error("the model was asked a message typed on a full store")
		}
	}
	typed.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("chat did not end with its input")
	}

	// A fleet of its own cannot start on it: the server refuses to make
	// its streams, and the error names the disk.
	err := dispatch(ctx, env, []string{"agent", "--data", dataDir, "-m", "hello"})
	if err == nil || !strings.Contains(err.Error(), "storage full") || !strings.Contains(err.Error(), "the store is in "+dataDir) {
		t.Errorf("agent -m on a full store: %v, want it refused saying the store is full", err)
	}
}
