package agentworker_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
)

// TestModelWarnsWhatToSet: a worker that starts without an API key warns
// with what to set, as each turn's error says (it said only that none was
// configured).
func TestModelWarnsWhatToSet(t *testing.T) {
	tests := []struct{ model, want string }{
		{"gpt-4o-mini", "no model API key configured: set OPENAI_API_KEY (or providers.openai.apiKey in the config); until then turns answer with an error"},
		{"deepseek-chat", "no model API key configured: set DEEPSEEK_API_KEY (or providers.deepseek.apiKey in the config); until then turns answer with an error"},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			file := config.Defaults()
			file.Agents.Defaults.Model = tt.model
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			if _, _, err := agentworker.Model(file, func(string) string { return "" }, 0, log); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), tt.want) {
				t.Errorf("logged %q, want %q", logs.String(), tt.want)
			}
		})
	}
}
