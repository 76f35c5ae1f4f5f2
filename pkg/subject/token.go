// Package subject names everything nanofleet puts on NATS: the subjects of
// each message kind, and the streams, buckets and consumers that hold them.
//
// Chat ids and session keys may contain characters a subject token cannot
// ('.', '*', '>', spaces, non-ASCII), so they travel as tokens made by
// [Token], a reversible encoding whose output is also a valid KV key.
package subject

import (
	"fmt"
	"strings"
)

const (
	escape = '='
	hexUp  = "0123456789ABCDEF"
)

// safe reports whether b is kept as itself in a token.
func safe(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_'
}

// Token encodes s into a single subject token: letters, digits, '-' and '_'
// stay as they are, every other byte becomes '=' and two upper-case hex
// digits, and the empty string becomes a lone "=". The result is a valid
// NATS subject token and KV key; [ParseToken] reverses it.
func Token(s string) string {
	if s == "" {
		return string(escape)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if !safe(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if safe(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte(escape)
		b.WriteByte(hexUp[c>>4])
		b.WriteByte(hexUp[c&0x0f])
	}
	return b.String()
}

// ParseToken reverses [Token]. It accepts exactly the strings Token
// produces, so every token has one meaning.
func ParseToken(tok string) (string, error) {
	if tok == string(escape) {
		return "", nil
	}
	if tok == "" {
		return "", fmt.Errorf("%w: empty", ErrBadToken)
	}
	if !strings.ContainsRune(tok, escape) {
		for i := 0; i < len(tok); i++ {
			if !safe(tok[i]) {
				return "", fmt.Errorf("%w: byte %q at %d", ErrBadToken, tok[i], i)
			}
		}
		return tok, nil
	}
	out := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case safe(c):
			out = append(out, c)
		case c == escape:
			if i+2 >= len(tok) {
				return "", fmt.Errorf("%w: truncated escape at %d", ErrBadToken, i)
			}
			hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
			if hi < 0 || lo < 0 {
				return "", fmt.Errorf("%w: bad escape %q at %d", ErrBadToken, tok[i:i+3], i)
			}
			v := byte(hi<<4 | lo)
			if safe(v) {
				return "", fmt.Errorf("%w: needless escape %q at %d", ErrBadToken, tok[i:i+3], i)
			}
			out = append(out, v)
			i += 2
		default:
			return "", fmt.Errorf("%w: byte %q at %d", ErrBadToken, c, i)
		}
	}
	return string(out), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
