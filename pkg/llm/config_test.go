package llm_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cfg       llm.Config
		wantField string // "" means valid
	}{
		{"openai with key", llm.Config{APIKey: "k", Model: "gpt-4o"}, ""},
		{"custom host without key", llm.Config{APIBase: "http://127.0.0.1:8000/v1", Model: "m"}, ""},
		{"ollama needs no key", llm.Config{Name: "ollama", Model: "llama3"}, ""},
		{"openai proxy without key", llm.Config{Name: "openai", APIBase: "http://proxy:8080/v1", Model: "m"}, ""},
		{"unknown provider", llm.Config{Name: "nope", APIKey: "k", Model: "m"}, "Name"},
		{"azure needs base", llm.Config{Name: "azure", APIKey: "k", Model: "m"}, "APIBase"},
		{"bad base", llm.Config{APIBase: "ftp://x", Model: "m"}, "APIBase"},
		{"relative base", llm.Config{APIBase: "localhost:8000", Model: "m"}, "APIBase"},
		{"openai without key", llm.Config{Model: "gpt-4o"}, "APIKey"},
		{"deepseek default host without key", llm.Config{Name: "deepseek", APIBase: "https://api.deepseek.com/v1/", Model: "m"}, "APIKey"},
		{"azure without key", llm.Config{Name: "azure", APIBase: "https://x.openai.azure.com", Model: "m"}, "APIKey"},
		{"no model", llm.Config{APIKey: "k"}, "Model"},
		{"negative timeout", llm.Config{APIKey: "k", Model: "m", Timeout: -time.Second}, "Timeout"},
		{"empty fallback", llm.Config{APIKey: "k", Model: "m", FallbackModels: []string{"a", " "}}, "FallbackModels"},
		{"bad header", llm.Config{APIKey: "k", Model: "m", ExtraHeaders: map[string]string{"X Bad": "v"}}, "ExtraHeaders"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *llm.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.wantField {
				t.Fatalf("Validate = %v, want a ConfigError on %s", err, tt.wantField)
			}
			if !errors.Is(err, llm.ErrInvalidConfig) {
				t.Errorf("%v does not match ErrInvalidConfig", err)
			}
			if _, err := llm.New(tt.cfg); !errors.Is(err, llm.ErrInvalidConfig) {
				t.Errorf("New accepted the config: %v", err)
			}
		})
	}
}

func TestNewOptions(t *testing.T) {
	t.Parallel()
	cfg := llm.Config{APIKey: "k", Model: "m"}
	tests := []struct {
		name string
		opt  llm.Option
	}{
		{"nil sleep", llm.WithSleep(nil)},
		{"nil clock", llm.WithClock(nil)},
		{"nil http client", llm.WithHTTPClient(nil)},
		{"bad backoff", llm.WithBackoff(time.Second, time.Millisecond)},
		{"negative retry-after cap", llm.WithMaxRetryAfter(-1)},
	}
	for _, tt := range tests {
		if _, err := llm.New(cfg, tt.opt); err == nil {
			t.Errorf("%s: New accepted the option", tt.name)
		}
	}
}
