package llm

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
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

// TestCappedBodyBound: a body of exactly the bound reads whole; one byte
// more fails, after the bound's bytes.
func TestCappedBodyBound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body    string
		bound   int64
		read    string
		tooMuch bool
	}{
		{"hello", 5, "hello", false},
		{"hello!", 5, "hello", true},
		{"", 0, "", false},
		{"h", 0, "", true},
	}
	for _, tt := range tests {
		b := &cappedBody{ReadCloser: io.NopCloser(iotest.OneByteReader(strings.NewReader(tt.body))), left: tt.bound}
		got, err := io.ReadAll(b)
		if string(got) != tt.read || errors.Is(err, ErrResponseTooLarge) != tt.tooMuch || (!tt.tooMuch && err != nil) {
			t.Errorf("%q bounded at %d: read %q, %v; want %q, too large %v", tt.body, tt.bound, got, err, tt.read, tt.tooMuch)
		}
	}
}
