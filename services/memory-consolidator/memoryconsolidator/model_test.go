package memoryconsolidator_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/memoryconsolidator"
)

// TestModelWarnsWhatToSet: a consolidator that starts without an API key
// warns with what to set, as the worker does.
func TestModelWarnsWhatToSet(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := memoryconsolidator.Model(config.Defaults(), func(string) string { return "" }, log); err != nil {
		t.Fatal(err)
	}
	want := "no model API key configured: set OPENAI_API_KEY (or providers.openai.apiKey in the config); until then consolidations archive raw turns"
	if !strings.Contains(logs.String(), want) {
		t.Errorf("logged %q, want %q", logs.String(), want)
	}
}
