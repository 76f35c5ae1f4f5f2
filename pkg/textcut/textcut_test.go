package textcut_test

import (
	"testing"
	"unicode/utf8"

	"github.com/nanofleet/nanofleet/pkg/textcut"
)

func TestBytes(t *testing.T) {
	if got := textcut.Prefix([]byte("中文字"), 4); string(got) != "中" {
		t.Errorf("Prefix of bytes = %q", got)
	}
	if got := textcut.Clip([]byte("中文字"), 4); got != "中…" {
		t.Errorf("Clip of bytes = %q", got)
	}
}

func TestCuts(t *testing.T) {
	tests := []struct {
		name string
		cut  func(string, int) string
		in   string
		n    int
		want string
	}{
		{"prefix fits", textcut.Prefix[string], "hello", 10, "hello"},
		{"prefix ascii", textcut.Prefix[string], "hello", 3, "hel"},
		{"prefix before a two-byte character", textcut.Prefix[string], "héllo", 2, "h"},
		{"prefix before a Chinese character", textcut.Prefix[string], "中文字", 4, "中"},
		{"prefix before an emoji", textcut.Prefix[string], "a😀b", 4, "a"},
		{"prefix at a boundary", textcut.Prefix[string], "中文字", 6, "中文"},
		{"prefix unbounded", textcut.Prefix[string], "hello", 0, "hello"},
		{"prefix of bytes that are not UTF-8", textcut.Prefix[string], "\x80\x80\x80\x80\x80\x80", 5, "\x80\x80\x80\x80\x80"},
		{"clip fits", textcut.Clip[string], "hello", 5, "hello"},
		{"clip marks the cut", textcut.Clip[string], "hello", 3, "hel…"},
		{"clip before a two-byte character", textcut.Clip[string], "héllo", 2, "h…"},
		{"clip before an emoji", textcut.Clip[string], "😀😀", 5, "😀…"},
		{"clip unbounded", textcut.Clip[string], "hello", 0, "hello"},
		{"suffix fits", textcut.Suffix, "hello", 9, "hello"},
		{"suffix ascii", textcut.Suffix, "hello", 2, "lo"},
		{"suffix after a Chinese character", textcut.Suffix, "中文字", 7, "文字"},
		{"suffix inside an emoji", textcut.Suffix, "a😀b", 4, "b"},
		{"rune prefix fits", textcut.RunePrefix, "中文", 2, "中文"},
		{"rune prefix cut", textcut.RunePrefix, "中文字", 2, "中文"},
		{"rune prefix of nothing", textcut.RunePrefix, "中文", 0, ""},
		{"rune prefix of an emoji", textcut.RunePrefix, "😀😀x", 1, "😀"},
		{"runes fit", textcut.Runes, "中文", 2, "中文"},
		{"runes cut to nothing", textcut.Runes, "中文", 0, "…"},
		{"runes cut", textcut.Runes, "中文字", 2, "中文…"},
		{"line collapses space", textcut.Line, "a\n\n b\tc", 10, "a b c"},
		{"line cut", textcut.Line, "one two\nthree", 7, "one two…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cut(tt.in, tt.n)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if utf8.ValidString(tt.in) && !utf8.ValidString(got) {
				t.Errorf("%q is not valid UTF-8", got)
			}
		})
	}
}
