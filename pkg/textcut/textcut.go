// Package textcut shortens text where its size is bounded, never in the
// middle of a character: a proto string refuses half a UTF-8 sequence
// (the whole envelope is lost), and a platform or a terminal shows it as
// garbage. Byte bounds fit stores and wire limits; rune bounds fit what a
// person reads.
package textcut

import (
	"strings"
	"unicode/utf8"
)

// Prefix returns at most n bytes of s, ending before a character that
// would not fit; n ≤ 0 means no bound. A cut steps back at most
// utf8.UTFMax-1 bytes: text that has no character start that close is not
// UTF-8 there, and is cut at n.
func Prefix[T ~string | ~[]byte](s T, n int) T {
	if n <= 0 || len(s) <= n {
		return s
	}
	cut := n
	for back := 0; back < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); back++ {
		cut--
	}
	if !utf8.RuneStart(s[cut]) {
		cut = n
	}
	return s[:cut]
}

// Clip is [Prefix] followed by "…" when it cut.
func Clip[T ~string | ~[]byte](s T, n int) string {
	if p := Prefix(s, n); len(p) < len(s) {
		return string(p) + "…"
	}
	return string(s)
}

// Suffix returns at most the last n bytes of s, starting at a character;
// n ≤ 0 means no bound.
func Suffix(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	from := len(s) - n
	for back := 0; back < utf8.UTFMax-1 && from < len(s) && !utf8.RuneStart(s[from]); back++ {
		from++
	}
	return s[from:]
}

// RunePrefix returns the first n characters of s (none for n ≤ 0).
func RunePrefix(s string, n int) string {
	for i := range s {
		if n <= 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// Runes returns the first n characters of s followed by "…" when there
// were more.
func Runes(s string, n int) string {
	if p := RunePrefix(s, n); len(p) < len(s) {
		return p + "…"
	}
	return s
}

// Line is s on one line, each run of white space a single space, cut like
// [Runes]: for a list entry or a label.
func Line(s string, n int) string {
	return Runes(strings.Join(strings.Fields(s), " "), n)
}
