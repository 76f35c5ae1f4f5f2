package llm_test

import (
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/llm"
)

func TestNewOrKeyless(t *testing.T) {
	for _, tt := range []struct {
		name        string
		cfg         llm.Config
		wantKeyless bool
		wantErr     bool
	}{
		{"with a key", llm.Config{Name: "openai", APIKey: "sk-x", Model: "m"}, false, false},
		{"without a key", llm.Config{Name: "openai", Model: "m"}, true, false},
		{"without a key, another provider", llm.Config{Name: "deepseek", Model: "m"}, true, false},
		{"without a model", llm.Config{Name: "openai", APIKey: "sk-x"}, false, true},
		// A key is not all that is missing: the other problem is reported.
		{"without a key, with a bad fallback", llm.Config{Name: "openai", Model: "m", FallbackModels: []string{" "}}, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, keyless, err := llm.NewOrKeyless(tt.cfg)
			if (err != nil) != tt.wantErr || keyless != tt.wantKeyless {
				t.Fatalf("keyless %v, err %v; want keyless %v, error %v", keyless, err, tt.wantKeyless, tt.wantErr)
			}
			if !keyless {
				return
			}
			_, err = c.Chat(t.Context(), llm.Request{})
			if want := llm.MissingKey(tt.cfg.Name); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("a keyless call: %v, want an error saying %q", err, want)
			}
		})
	}
}

// TestMissingKey: the variable named is the one read for the provider
// (a deepseek fleet was told to set OPENAI_API_KEY, which it does not
// read), beside the provider's key in the file.
func TestMissingKey(t *testing.T) {
	for _, tt := range []struct{ provider, want string }{
		{"openai", "set OPENAI_API_KEY (or providers.openai.apiKey in the config)"},
		{"deepseek", "set DEEPSEEK_API_KEY (or providers.deepseek.apiKey in the config)"},
		{"azure", "set AZURE_OPENAI_API_KEY (or providers.azure.apiKey in the config)"},
		{"custom", "set OPENAI_API_KEY (or providers.custom.apiKey in the config)"},
	} {
		if got := llm.MissingKey(tt.provider); got != tt.want {
			t.Errorf("MissingKey(%q) = %q, want %q", tt.provider, got, tt.want)
		}
		// What ResolveFromEnv reads for the provider is what is named.
		env := strings.Fields(tt.want)[1]
		cfg := llm.ResolveFromEnv(llm.Config{Name: tt.provider}, func(k string) string {
			if k == env {
				return "k"
			}
			return ""
		})
		if cfg.APIKey != "k" {
			t.Errorf("%s: ResolveFromEnv does not read %s", tt.provider, env)
		}
	}
}
