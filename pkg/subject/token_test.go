package subject

import (
	"errors"
	"regexp"
	"testing"
)

// kvKey is the key syntax of the JetStream KV store.
var kvKey = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)

func TestTokenRoundTrip(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "="},
		{"12345", "12345"},
		{"-100123", "-100123"},
		{"telegram:42", "telegram=3A42"},
		{"a.b", "a=2Eb"},
		{"*>", "=2A=3E"},
		{"with space", "with=20space"},
		{"=", "=3D"},
		{"ü", "=C3=BC"},
	}
	for _, tt := range tests {
		got := Token(tt.in)
		if got != tt.want {
			t.Errorf("Token(%q) = %q, want %q", tt.in, got, tt.want)
		}
		back, err := ParseToken(got)
		if err != nil || back != tt.in {
			t.Errorf("ParseToken(%q) = %q, %v; want %q", got, back, err, tt.in)
		}
	}
}

func TestParseTokenRejects(t *testing.T) {
	for _, tok := range []string{"", "a.b", "=4", "=zz", "=41", "=3a", "a b", "x="} {
		if _, err := ParseToken(tok); !errors.Is(err, ErrBadToken) {
			t.Errorf("ParseToken(%q) error = %v, want ErrBadToken", tok, err)
		}
	}
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"", "a", "telegram:1", "a.b.*.>", "\x00\xff", "日本", "=", "=3D"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := Token(s)
		if !kvKey.MatchString(tok) {
			t.Fatalf("Token(%q) = %q is not a valid KV key / subject token", s, tok)
		}
		back, err := ParseToken(tok)
		if err != nil || back != s {
			t.Fatalf("round trip of %q via %q gave %q, %v", s, tok, back, err)
		}
		// Every string ParseToken accepts must be Token's own output.
		if v, err := ParseToken(s); err == nil && Token(v) != s {
			t.Fatalf("ParseToken(%q) accepted a non-canonical token", s)
		}
	})
}
