package llm_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm"
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
