package output_test

import (
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools/output"
)

func TestPreview(t *testing.T) {
	text := strings.Repeat("é", 50)
	got := output.Preview(text, "tool-output/s/1", 10)
	if !strings.HasPrefix(got, strings.Repeat("é", 10)+"\n\n[Output truncated: 50 characters in all, the first 10 shown.") ||
		!strings.Contains(got, `ref="tool-output/s/1"`) || !strings.Contains(got, "offset=10") {
		t.Errorf("preview: %q", got)
	}
}
