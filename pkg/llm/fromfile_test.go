package llm_test

import (
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
