package llm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/llm"
)

func TestPresetFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, base, keyEnv string
		azure              bool
	}{
		{"openai", "https://api.openai.com/v1", "OPENAI_API_KEY", false},
		{"openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", false},
		{"deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", false},
		{"groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY", false},
		{"gemini", "https://generativelanguage.googleapis.com/v1beta/openai", "GEMINI_API_KEY", false},
		{"anthropic", "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY", false},
		{"azure", "", "AZURE_OPENAI_API_KEY", true},
		{"ollama", "http://localhost:11434/v1", "", false},
		{"vllm", "http://localhost:8000/v1", "", false},
		{"LMStudio", "http://localhost:1234/v1", "", false},
	}
	for _, tt := range tests {
		p, ok := llm.PresetFor(tt.name)
		if !ok || p.APIBase != tt.base || p.KeyEnv != tt.keyEnv || p.Azure != tt.azure {
			t.Errorf("PresetFor(%q) = %+v, %v", tt.name, p, ok)
		}
	}
	if _, ok := llm.PresetFor("nope"); ok {
		t.Error("PresetFor(nope) found a preset")
	}
}

func TestInferProvider(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"openrouter/anthropic/claude-3": "openrouter",
		"deepseek-chat":                 "deepseek",
		"deepseek/deepseek-reasoner":    "deepseek",
		"anthropic/claude-sonnet-4":     "anthropic",
		"claude-3-5-sonnet":             "anthropic",
		"gemini-2.0-flash":              "gemini",
		"groq/llama-3.1-70b":            "groq",
		"ollama/llama3":                 "ollama",
		"gpt-4o-mini":                   "openai",
		"o3-mini":                       "openai",
		"llama3":                        "",
		"":                              "",
	}
	for model, want := range tests {
		if got := llm.InferProvider(model); got != want {
			t.Errorf("InferProvider(%q) = %q, want %q", model, got, want)
		}
	}
}

func TestResolveFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  llm.Config
		env  map[string]string
		want llm.Config
	}{
		{
			name: "openai key from env",
			cfg:  llm.Config{Model: "gpt-4o"},
			env:  map[string]string{"OPENAI_API_KEY": "sk-1"},
			want: llm.Config{Name: "openai", APIKey: "sk-1", Model: "gpt-4o"},
		},
		{
			name: "base url alone means a compatible host",
			cfg:  llm.Config{Model: "qwen3"},
			env:  map[string]string{"OPENAI_BASE_URL": "http://gpu:8000/v1"},
			want: llm.Config{Name: "custom", APIBase: "http://gpu:8000/v1", Model: "qwen3"},
		},
		{
			name: "base url and key",
			cfg:  llm.Config{Model: "deepseek-chat"},
			env:  map[string]string{"OPENAI_BASE_URL": "http://gw/v1", "OPENAI_API_KEY": "sk-2"},
			want: llm.Config{Name: "custom", APIBase: "http://gw/v1", APIKey: "sk-2", Model: "deepseek-chat"},
		},
		{
			name: "explicit openai takes base url",
			cfg:  llm.Config{Name: "openai", Model: "gpt-4o"},
			env:  map[string]string{"OPENAI_BASE_URL": "http://proxy/v1", "OPENAI_API_KEY": "sk-3"},
			want: llm.Config{Name: "openai", APIBase: "http://proxy/v1", APIKey: "sk-3", Model: "gpt-4o"},
		},
		{
			name: "NANOFLEET_MODEL overrides and selects the provider",
			cfg:  llm.Config{Model: "gpt-4o"},
			env:  map[string]string{"NANOFLEET_MODEL": "openrouter/anthropic/claude-3", "OPENROUTER_API_KEY": "or-1", "OPENAI_API_KEY": "sk-4"},
			want: llm.Config{Name: "openrouter", APIKey: "or-1", Model: "openrouter/anthropic/claude-3"},
		},
		{
			name: "deepseek inferred from model",
			cfg:  llm.Config{Model: "deepseek-chat"},
			env:  map[string]string{"DEEPSEEK_API_KEY": "ds-1", "OPENAI_API_KEY": "sk-5"},
			want: llm.Config{Name: "deepseek", APIKey: "ds-1", Model: "deepseek-chat"},
		},
		{
			name: "preset key variable",
			cfg:  llm.Config{Name: "groq", Model: "llama-3.1-70b"},
			env:  map[string]string{"GROQ_API_KEY": "gq-1", "OPENAI_API_KEY": "sk-6", "OPENAI_BASE_URL": "http://x/v1"},
			want: llm.Config{Name: "groq", APIKey: "gq-1", Model: "llama-3.1-70b"},
		},
		{
			name: "config wins over env except the model",
			cfg:  llm.Config{Name: "openai", APIKey: "cfg-key", APIBase: "http://cfg/v1", Model: "a"},
			env:  map[string]string{"OPENAI_API_KEY": "env", "OPENAI_BASE_URL": "http://env/v1", "NANOFLEET_MODEL": "b"},
			want: llm.Config{Name: "openai", APIKey: "cfg-key", APIBase: "http://cfg/v1", Model: "b"},
		},
		{
			name: "a compatible host the config names is not sent OpenAI's key",
			cfg:  llm.Config{Name: "custom", APIBase: "http://127.0.0.1:11434/v1", Model: "qwen3"},
			env:  map[string]string{"OPENAI_API_KEY": "sk-openai"},
			want: llm.Config{Name: "custom", APIBase: "http://127.0.0.1:11434/v1", Model: "qwen3"},
		},
		{
			name: "nor one inferred from its base",
			cfg:  llm.Config{APIBase: "https://llm.example.net/v1", Model: "qwen3"},
			env:  map[string]string{"OPENAI_API_KEY": "sk-openai", "OPENAI_BASE_URL": "http://other/v1"},
			want: llm.Config{Name: "custom", APIBase: "https://llm.example.net/v1", Model: "qwen3"},
		},
		{
			name: "the host OPENAI_BASE_URL names gets OPENAI_API_KEY also when the config names it too",
			cfg:  llm.Config{Name: "custom", APIBase: "http://gw/v1", Model: "qwen3"},
			env:  map[string]string{"OPENAI_API_KEY": "sk-gw", "OPENAI_BASE_URL": "http://gw/v1"},
			want: llm.Config{Name: "custom", APIBase: "http://gw/v1", APIKey: "sk-gw", Model: "qwen3"},
		},
		{
			name: "unknown model defaults to openai",
			cfg:  llm.Config{Model: "llama3"},
			env:  map[string]string{},
			want: llm.Config{Name: "openai", Model: "llama3"},
		},
		{
			name: "azure key",
			cfg:  llm.Config{Name: "azure", APIBase: "https://r.openai.azure.com", Model: "gpt-4o"},
			env:  map[string]string{"AZURE_OPENAI_API_KEY": "az"},
			want: llm.Config{Name: "azure", APIBase: "https://r.openai.azure.com", APIKey: "az", Model: "gpt-4o"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := llm.ResolveFromEnv(tt.cfg, func(k string) string { return tt.env[k] })
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("ResolveFromEnv =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

func ExampleInferProvider() {
	fmt.Println(llm.InferProvider("openrouter/anthropic/claude-3"))
	fmt.Println(llm.InferProvider("deepseek-chat"))
	// Output:
	// openrouter
	// deepseek
}

func ExampleResolveFromEnv() {
	env := map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1", "NANOFLEET_MODEL": "qwen3"}
	cfg := llm.ResolveFromEnv(llm.Config{}, func(k string) string { return env[k] })
	fmt.Println(cfg.Name, cfg.APIBase, cfg.Model, cfg.Validate() == nil)
	// Output: custom http://127.0.0.1:8000/v1 qwen3 true
}

// TestWithheldEnvKey: start-up says when OPENAI_API_KEY is set but not
// sent to the compatible host the config names, and only then.
func TestWithheldEnvKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  llm.Config
		env  map[string]string
		want bool
	}{
		{"config's host, env key", llm.Config{Name: "custom", APIBase: "http://127.0.0.1:11434/v1"}, map[string]string{"OPENAI_API_KEY": "k"}, true},
		{"config's host, no env key", llm.Config{Name: "custom", APIBase: "http://127.0.0.1:11434/v1"}, map[string]string{}, false},
		{"config's host with its own key", llm.Config{Name: "custom", APIBase: "http://h/v1", APIKey: "own"}, map[string]string{"OPENAI_API_KEY": "k"}, false},
		{"the env's host", llm.Config{}, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://gw/v1"}, false},
		{"openai", llm.Config{Name: "openai"}, map[string]string{"OPENAI_API_KEY": "k"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			w := llm.WithheldEnvKey(llm.ResolveFromEnv(tt.cfg, getenv), getenv)
			if (w != "") != tt.want {
				t.Fatalf("WithheldEnvKey = %q, want a warning: %t", w, tt.want)
			}
			if tt.want && !strings.Contains(w, tt.cfg.APIBase) {
				t.Errorf("warning %q does not name the host", w)
			}
		})
	}
}
