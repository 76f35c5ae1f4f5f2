package llm_test

import (
	"net"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
)

// TestTemporary: the failures of real calls that may pass when made again
// later (rate limits, server errors, a model host that is down) are
// temporary; refused credentials, a refused request and a missing key are
// not.
func TestTemporary(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + closed.Addr().String() + "/v1"
	closed.Close()
	failing := func(status int) func(t *testing.T) error {
		return func(t *testing.T) error {
			p, _ := newProvider(t, llmtest.NewServer(t, llmtest.WithFailures(10, status)), nil, llm.WithRateLimitPatience(0))
			_, err := p.Chat(t.Context(), llm.Request{Messages: userMsg("hi")})
			return err
		}
	}
	tests := []struct {
		name string
		call func(t *testing.T) error
		want bool
	}{
		{"rate limited", failing(429), true},
		{"server error", failing(503), true},
		{"model host down", func(t *testing.T) error {
			p, err := llm.New(llm.Config{APIBase: down, Model: "m", MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Chat(t.Context(), llm.Request{Messages: userMsg("hi")})
			return err
		}, true},
		{"bad key", failing(401), false},
		{"bad request", failing(400), false},
		{"no key", func(t *testing.T) error {
			c, _, err := llm.NewOrKeyless(llm.Config{Name: "openai", Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Chat(t.Context(), llm.Request{Messages: userMsg("hi")})
			return err
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(t)
			if err == nil {
				t.Fatal("the call succeeded")
			}
			if got := llm.Temporary(err); got != tt.want {
				t.Errorf("Temporary(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
}
