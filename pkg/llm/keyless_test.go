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
		{"without a model", llm.Config{Name: "openai", APIKey: "sk-x"}, false, true},
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
			if err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
				t.Errorf("a keyless call: %v, want an error naming the key to set", err)
			}
		})
	}
}
