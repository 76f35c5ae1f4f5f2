package llm_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestFromFile(t *testing.T) {
	tests := []struct {
		name, json   string
		env          map[string]string
		wantProvider string
		wantBase     string
		wantKey      string
		wantModel    string
	}{
		{"env only", `{}`, map[string]string{"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "custom", "http://127.0.0.1:9/v1", "sk-env", "gpt-4o-mini"},
		{"provider entry", `{"agents":{"defaults":{"model":"deepseek-chat"}},"providers":{"deepseek":{"apiKey":"dk"}}}`, nil, "deepseek", "", "dk", "deepseek-chat"},
		{"model override", `{}`, map[string]string{"NANOFLEET_MODEL": "gpt-5", "OPENAI_API_KEY": "k"}, "openai", "", "k", "gpt-5"},
		{"env model over the config's, local server", `{"agents":{"defaults":{"model":"gpt-4o-mini"}}}`,
			map[string]string{"NANOFLEET_MODEL": "qwen3", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, "custom", "http://127.0.0.1:11434/v1", "", "qwen3"},
		// nanobot's fallbacks when the provider the model names has no key.
		{"nanobot's default model through an OpenRouter key", `{"agents":{"defaults":{"model":"anthropic/claude-opus-4-5","provider":"auto"}},
			"providers":{"anthropic":{"apiKey":""},"openrouter":{"apiKey":"sk-or"}}}`, nil, "openrouter", "", "sk-or", "anthropic/claude-opus-4-5"},
		{"a model naming no provider, the one provider with a key", `{"agents":{"defaults":{"model":"qwen3"}},
			"providers":{"openai":{"apiKey":"k","apiBase":"http://127.0.0.1:8000/v1"}}}`, nil, "openai", "http://127.0.0.1:8000/v1", "k", "qwen3"},
		{"a model naming no provider, nanobot's empty custom entry", `{"agents":{"defaults":{"model":"qwen3"}},
			"providers":{"custom":{"apiKey":"","apiBase":null},"openrouter":{"apiKey":"sk-or"}}}`, nil, "openrouter", "", "sk-or", "qwen3"},
		{"a model naming no provider, nothing configured but nanobot's empty custom entry", `{"agents":{"defaults":{"model":"qwen3"}},
			"providers":{"custom":{"apiKey":"","apiBase":null}}}`, nil, "openai", "", "", "qwen3"},
		{"a model naming no provider, a local server", `{"agents":{"defaults":{"model":"llama3.2"}},
			"providers":{"ollama":{"apiBase":"http://127.0.0.1:11434/v1"},"openrouter":{"apiKey":"sk-or"}}}`, nil, "ollama", "http://127.0.0.1:11434/v1", "", "llama3.2"},
		{"the named provider's key in the environment wins", `{"agents":{"defaults":{"model":"anthropic/claude-opus-4-5"}},"providers":{"openrouter":{"apiKey":"sk-or"}}}`,
			map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}, "anthropic", "", "sk-ant", "anthropic/claude-opus-4-5"},
		{"no key anywhere: the named provider, to name its key", `{"agents":{"defaults":{"model":"claude-sonnet-4"}}}`, nil, "anthropic", "", "", "claude-sonnet-4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := config.Defaults()
			if err := config.Parse(f, []byte(tt.json), env(tt.env)); err != nil {
				t.Fatal(err)
			}
			// The worker names agents.defaults.model in its requests and
			// in /status: it must be the model the provider was built for.
			if f.Agents.Defaults.Model != tt.wantModel {
				t.Errorf("agents.defaults.model = %q, want %q", f.Agents.Defaults.Model, tt.wantModel)
			}
			got := llm.FromFile(f, env(tt.env))
			if got.Name != tt.wantProvider || got.APIBase != tt.wantBase || got.APIKey != tt.wantKey || got.Model != tt.wantModel {
				t.Errorf("FromFile = %+v", got)
			}
		})
	}
}

// TestProviderAuto: nanobot's onboard writes "provider": "auto", its word
// for inferring the provider from the model name.
func TestProviderAuto(t *testing.T) {
	for _, provider := range []string{"auto", ""} {
		f := config.Defaults()
		doc := `{"agents": {"defaults": {"model": "deepseek/deepseek-chat", "provider": "` + provider + `"}}, "providers": {"deepseek": {"apiKey": "k"}}}`
		if err := config.Parse(f, []byte(doc), env(nil)); err != nil {
			t.Fatal(err)
		}
		c := llm.FromFile(f, env(nil))
		if err := c.Validate(); err != nil || c.Name != "deepseek" || c.APIKey != "k" {
			t.Errorf("provider %q: %+v, %v", provider, c, err)
		}
	}
}

// TestCheckProviders: a providers entry FromFile would never read fails
// naming it and the providers nanofleet has (a misspelt one, and one of
// nanobot's that nanofleet has not, were taken and ignored); nanobot's
// unset entries, which its config.json holds for every provider, pass.
func TestCheckProviders(t *testing.T) {
	const has = "nanofleet has openai, openrouter, deepseek, groq, gemini, anthropic, azure, ollama, vllm, lmstudio, custom (any OpenAI-compatible endpoint, by its apiBase)"
	tests := []struct {
		name, json string
		want       []string // "key: reason", one line each; none: no error
	}{
		{"presets", `{"providers": {"openai": {"apiKey": "k"}, "custom": {"apiBase": "http://127.0.0.1:1/v1"}, "lmstudio": {}}}`, nil},
		{"misspelt", `{"providers": {"opneai": {"apiKey": "x"}}}`,
			[]string{"providers.opneai: unknown provider; " + has + "; did you mean openai?"}},
		{"another case", `{"providers": {"OpenAI": {"apiKey": "x"}}}`,
			[]string{"providers.OpenAI: unknown provider; " + has + "; did you mean openai?"}},
		{"nothing like one", `{"providers": {"mycorp": {"apiBase": "http://127.0.0.1:1/v1"}}}`,
			[]string{"providers.mycorp: unknown provider; " + has}},
		{"nanobot's, not nanofleet's", `{"providers": {"zhipu": {"apiKey": "abc"}}}`,
			[]string{`providers.zhipu: nanobot's zhipu provider is not supported by nanofleet; for an OpenAI-compatible endpoint use providers.custom (apiKey, apiBase) with agents.defaults.provider "custom"; ` + has}},
		{"nanobot's name for a preset", `{"providers": {"azureOpenai": {"apiKey": "k"}, "lm_studio": {"apiBase": "http://127.0.0.1:1/v1"}}}`,
			[]string{
				"providers.azureOpenai: nanobot's azure_openai is nanofleet's azure: rename the key to providers.azure",
				"providers.lm_studio: nanobot's lm_studio is nanofleet's lmstudio: rename the key to providers.lmstudio",
			}},
		{"nanobot's unset entries", `{"providers": {"zhipu": {"apiKey": "", "apiBase": null}, "azureOpenai": {"apiKey": ""}, "dashscope": {}, "openaiCodex": {"apiType": "auto"}}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := config.Defaults()
			if err := config.Parse(f, []byte(tt.json), env(nil)); err != nil {
				t.Fatal(err)
			}
			err := llm.CheckProviders(f)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckProviders = %v, want nil", err)
				}
				return
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, "invalid config: "+w)
			}
			if !errors.Is(err, config.ErrInvalid) || err.Error() != strings.Join(want, "\n") {
				t.Fatalf("CheckProviders = %v, want\n%s", err, strings.Join(want, "\n"))
			}
		})
	}
}

// TestCheckFile: the model's settings are checked as the worker reads
// them, all at once, a missing API key aside (a fleet starts without
// one).
func TestCheckFile(t *testing.T) {
	tests := []struct {
		name, json string
		want       string
	}{
		{"no key", `{}`, ""},
		{"no key, a bad fallback", `{"agents": {"defaults": {"fallbackModels": [" "]}}}`, "invalid config: agents.defaults.fallbackModels: entry 0 is empty"},
		{"every problem of the provider", `{"agents": {"defaults": {"fallbackModels": ["a", " "]}}, "providers": {"openai": {"apiBase": "not a url", "extraHeaders": {"bad header": "x"}}}}`,
			`invalid config: providers.openai.apiBase: not an absolute http(s) URL: "not a url"` + "\n" +
				"invalid config: agents.defaults.fallbackModels: entry 1 is empty\n" +
				`invalid config: providers.openai.extraHeaders: invalid header name "bad header"`},
		{"a bad name and a bad base", `{"providers": {"opneai": {"apiKey": "k"}, "openai": {"apiBase": "not a url"}}}`,
			"invalid config: providers.opneai: unknown provider; nanofleet has openai, openrouter, deepseek, groq, gemini, anthropic, azure, ollama, vllm, lmstudio, custom (any OpenAI-compatible endpoint, by its apiBase); did you mean openai?\n" +
				`invalid config: providers.openai.apiBase: not an absolute http(s) URL: "not a url"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := config.Defaults()
			if err := config.Parse(f, []byte(tt.json), env(nil)); err != nil {
				t.Fatal(err)
			}
			err := llm.CheckFile(f, env(nil))
			if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && got != tt.want) {
				t.Fatalf("CheckFile = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestNewFromFile: the client the worker and the consolidator build from
// the file, with the warnings a start without a key (or with a key held
// back) logs and the retries asked for.
func TestNewFromFile(t *testing.T) {
	const without = "the service waits"
	// A server whose first answer is a 500, at {URL}.
	const local = `{"agents":{"defaults":{"model":"m"}},"providers":{"custom":{"apiKey":"k","apiBase":"{URL}"}}}`
	tests := []struct {
		name, json   string
		env          map[string]string
		maxRetries   int
		wantErr      error  // nil: a client
		wantProvider string // with the client
		wantLog      string // "" logs nothing
		wantKeyless  bool   // its calls fail naming the key to set
		wantRequests int    // >0: a call is made, answered after as many requests
	}{
		{name: "keyed", json: `{"providers":{"openai":{"apiKey":"sk-x"}}}`, wantProvider: "openai"},
		{name: "without a key", json: `{}`, wantProvider: "openai", wantKeyless: true,
			wantLog: "no model API key configured: set OPENAI_API_KEY (or providers.openai.apiKey in the config); until then the service waits"},
		{name: "without a key, another provider", json: `{"agents":{"defaults":{"model":"deepseek-chat"}}}`, wantProvider: "deepseek", wantKeyless: true,
			wantLog: "set DEEPSEEK_API_KEY (or providers.deepseek.apiKey in the config); until then the service waits"},
		{name: "OPENAI_API_KEY held back from a host the file names", json: `{"agents":{"defaults":{"model":"qwen3"}},"providers":{"custom":{"apiBase":"http://127.0.0.1:9/v1"}}}`,
			env: map[string]string{"OPENAI_API_KEY": "sk-env"}, wantProvider: "custom", wantLog: "providers.custom has no apiKey"},
		{name: "a provider nanofleet has not", json: `{"providers":{"opneai":{"apiKey":"k"}}}`, wantErr: config.ErrInvalid},
		{name: "a bad setting of the provider in use", json: `{"agents":{"defaults":{"model":" "}},"providers":{"openai":{"apiKey":"k"}}}`, wantErr: config.ErrInvalid},
		{name: "retried as asked", json: local, maxRetries: 1, wantProvider: "custom", wantRequests: 2},
		{name: "not retried when asked not to", json: local, maxRetries: -1, wantProvider: "custom", wantRequests: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srv *llmtest.Server
			if tt.wantRequests > 0 {
				srv = llmtest.NewServer(t, llmtest.WithFailures(1, http.StatusInternalServerError))
				tt.json = strings.ReplaceAll(tt.json, "{URL}", srv.URL())
			}
			f := config.Defaults()
			if err := config.Parse(f, []byte(tt.json), env(tt.env)); err != nil {
				t.Fatal(err)
			}
			var logs strings.Builder
			log := slog.New(slog.NewTextHandler(&logs, nil))
			c, provider, err := llm.NewFromFile(f, env(tt.env), tt.maxRetries, without, llm.WithLogger(log))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("NewFromFile = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || provider != tt.wantProvider {
				t.Fatalf("NewFromFile = provider %q, %v; want %q", provider, err, tt.wantProvider)
			}
			if tt.wantLog == "" && logs.Len() > 0 || !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("logged %q, want %q", logs.String(), tt.wantLog)
			}
			if tt.wantKeyless {
				_, err := c.Chat(t.Context(), llm.Request{})
				if want := llm.MissingKey(provider); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("a keyless call: %v, want an error saying %q", err, want)
				}
			}
			if tt.wantRequests > 0 {
				srv.Enqueue(llmtest.Text("ok"))
				_, err := c.Chat(t.Context(), llm.Request{Messages: []*nanofleetv1.ChatMessage{{Role: "user", Content: "hi"}}})
				if got := srv.RequestCount(); got != tt.wantRequests {
					t.Errorf("%d requests (err %v), want %d", got, err, tt.wantRequests)
				}
			}
		})
	}
}
