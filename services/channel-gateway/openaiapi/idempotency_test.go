package openaiapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
)

// postKeyed sends a chat completion with an Idempotency-Key and returns
// the answer's content, or the status and body when it is not an answer.
func postKeyed(ctx context.Context, url, idemKey, text string) (string, error) {
	return post(ctx, url, map[string]string{"Idempotency-Key": idemKey}, text)
}

// post sends a chat completion with the given headers.
func post(ctx context.Context, url string, header map[string]string, text string) (string, error) {
	body := `{"model":"nanofleet","user":"retry","messages":[{"role":"user","content":` + quote(text) + `}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var r struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &r) != nil || len(r.Choices) != 1 {
		return "", &statusError{resp.StatusCode, string(data)}
	}
	return r.Choices[0].Message.Content, nil
}

type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return http.StatusText(e.status) + ": " + e.body }

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestIdempotencyKeyRetry: a request repeated with the same
// Idempotency-Key gets the first request's answer, whether the first is
// done or still running, and the fleet runs one turn.
func TestIdempotencyKeyRetry(t *testing.T) {
	for _, running := range []bool{false, true} {
		name := map[bool]string{false: "after the first is done", true: "while the first runs"}[running]
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			if !running {
				close(release)
			}
			_, w, url, b := startBus(t, workertest.HoldUntil(release, 10*time.Second))
			type result struct {
				answer string
				err    error
			}
			first := make(chan result, 1)
			go func() {
				a, err := postKeyed(ctx(t), url, "key-1", "only once")
				first <- result{a, err}
			}()
			select {
			case <-w.Inbound:
			case <-time.After(10 * time.Second):
				t.Fatal("the first request reached no worker")
			}
			var got result
			if !running {
				select {
				case got = <-first:
				case <-time.After(10 * time.Second):
					t.Fatal("no first answer")
				}
			}
			second := make(chan result, 1)
			go func() {
				a, err := postKeyed(ctx(t), url, "key-1", "only once")
				second <- result{a, err}
			}()
			if running {
				// Once the retry watches the chat (its consumer beside the
				// first one's), let the turn finish.
				waitConsumers(t, b, 2)
				close(release)
				select {
				case got = <-first:
				case <-time.After(10 * time.Second):
					t.Fatal("no first answer")
				}
			}
			var again result
			select {
			case again = <-second:
			case <-time.After(10 * time.Second):
				t.Fatal("the retry got no answer within 10s")
			}
			if got.err != nil || again.err != nil || got.answer != "You said: only once" || again.answer != got.answer {
				t.Fatalf("first %+v, retry %+v", got, again)
			}
			if n := len(w.Inbound); n != 0 {
				t.Errorf("the worker took %d more messages", n)
			}
		})
	}
}

// waitConsumers waits, bounded, until the outbound stream has n consumers:
// each waiting request has one.
func waitConsumers(t *testing.T, b *bus.Bus, n int) {
	t.Helper()
	bustest.Eventually(t, 10*time.Second, func() error {
		info, err := b.JS.Stream(t.Context(), b.Space.OutboundStream())
		if err != nil {
			t.Fatal(err)
		}
		if got := info.CachedInfo().State.Consumers; got < n {
			return fmt.Errorf("%d consumers on the outbound stream, want %d", got, n)
		}
		return nil
	})
}

// TestSDKRetry: the OpenAI SDKs retry with the same body and a higher
// X-Stainless-Retry-Count but no key; such a retry gets the first answer,
// while the same question asked anew (attempt 0 again) is a turn of its
// own.
func TestSDKRetry(t *testing.T) {
	tests := []struct {
		name     string
		attempts []string
		turns    int
	}{
		{"retry", []string{"0", "1"}, 1},
		{"asked again", []string{"0", "0"}, 2},
		{"asked again, then retried", []string{"0", "0", "1"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, w, url := start(t)
			for i, n := range tt.attempts {
				a, err := post(ctx(t), url, map[string]string{"X-Stainless-Retry-Count": n}, "same question")
				if err != nil || a != "You said: same question" {
					t.Fatalf("request %d (attempt %s): %q, %v", i, n, a, err)
				}
			}
			if got := len(w.Inbound); got != tt.turns {
				t.Errorf("%d turns, want %d", got, tt.turns)
			}
		})
	}
}
