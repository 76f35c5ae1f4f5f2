package llm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// TestAPIErrorBodyCutOnCharacters: a provider's error body that is not
// JSON (a gateway's page) is kept to 200 bytes in the error; cut inside a
// character, it made the error reply the user gets invalid UTF-8, which
// proto.Marshal refuses.
func TestAPIErrorBodyCutOnCharacters(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body, want string }{
		{"short", "  <h1>502 Bad Gateway</h1>\n", "<h1>502 Bad Gateway</h1>"},
		{"chinese cut inside a character", strings.Repeat("网关错误", 30), strings.Repeat("网关错误", 16) + "网关…"},
		{"emoji cut inside a character", "a" + strings.Repeat("🔥", 60), "a" + strings.Repeat("🔥", 49) + "…"},
		{"chinese cut at a boundary", "ab" + strings.Repeat("错", 80), "ab" + strings.Repeat("错", 66) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fmt.Errorf("chat: %w", &openai.RequestError{HTTPStatusCode: 502, Body: []byte(tt.body)})
			ae := apiErrorFrom(err, nil, time.Now())
			if ae == nil || ae.Status != 502 || ae.Message != tt.want {
				t.Errorf("apiErrorFrom = %+v, want status 502 and message %q", ae, tt.want)
			}
		})
	}
}
