package sandbox

import (
	"bytes"
	"strings"
	"testing"
)

func TestHeadTail(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		writes []string
		want   string
	}{
		{"fits", 10, []string{"abc", "def"}, "abcdef"},
		{"exactly", 6, []string{"abcdef"}, "abcdef"},
		{"head and tail", 6, []string{"abcdefghij"}, "abc\n\n... [4 bytes of output omitted] ...\n\nhij"},
		{"many small writes", 6, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, "abc\n\n... [4 bytes of output omitted] ...\n\nhij"},
		{"wrap inside ring", 8, []string{"abcd", "ef", "gh", "ij", "kl"}, "abcd\n\n... [4 bytes of output omitted] ...\n\nijkl"},
		{"utf8 cut", 8, []string{"ééééééééé"}, "éé\n\n... [10 bytes of output omitted] ...\n\néé"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHeadTail(tt.limit)
			for _, w := range tt.writes {
				if n, err := h.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := h.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHeadTailMatchesNaive(t *testing.T) {
	data := []byte(strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz", 50))
	for _, limit := range []int{2, 7, 10, 64, 101} {
		for _, chunk := range []int{1, 3, 17, 100, 5000} {
			h := NewHeadTail(limit)
			for i := 0; i < len(data); i += chunk {
				h.Write(data[i:min(i+chunk, len(data))])
			}
			head, tail := data[:limit/2], data[len(data)-(limit-limit/2):]
			got := h.String()
			if !strings.HasPrefix(got, string(head)) || !strings.HasSuffix(got, string(tail)) || !h.Truncated() || h.Total() != int64(len(data)) {
				t.Fatalf("limit %d chunk %d: got %q", limit, chunk, got)
			}
			if bytes.Count([]byte(got), []byte("omitted")) != 1 {
				t.Fatalf("limit %d chunk %d: no omission note in %q", limit, chunk, got)
			}
		}
	}
}
