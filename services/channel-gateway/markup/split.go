package markup

import (
	"strings"
	"unicode/utf16"
)

// Limits of one message, in UTF-16 code units (how Telegram counts), with
// room to spare for the markup a renderer adds.
const (
	TelegramLimit = 4000
	SlackLimit    = 4000
)

// Len is the length of s in UTF-16 code units, the unit Telegram's and
// Slack's limits are counted in.
func Len(s string) int {
	n := 0
	for _, r := range s {
		n += u16(r)
	}
	return n
}

// u16 is the UTF-16 length of r; invalid runes count as one.
func u16(r rune) int { return max(1, utf16.RuneLen(r)) }

// Split cuts Markdown into pieces of at most limit UTF-16 code units,
// preferring paragraph boundaries, then line breaks, then spaces. A fenced
// code block that must be cut is closed and reopened around the cut, so
// each piece renders on its own. Text within the limit comes back as one
// piece; empty text as none.
func Split(md string, limit int) []string {
	md = strings.TrimSpace(md)
	if md == "" {
		return nil
	}
	if limit < 16 {
		limit = 16
	}
	if Len(md) <= limit {
		return []string{md}
	}
	var pieces []string
	for _, b := range blocks(md) {
		pieces = append(pieces, fit(b, limit)...)
	}
	var out []string
	for _, p := range pack(pieces, "\n\n", limit) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// SplitRendered is Split for a platform that counts what a piece renders
// to, not its Markdown: size measures that in the platform's unit, and a
// piece whose size is over most is split again, at a limit shrunk in
// proportion, until it fits (or is down to 16 units). Rendering mostly
// shortens Markdown, but a table is padded to its widest cell on every
// row and a thematic break becomes ten characters, so a piece within limit
// can render to several times most. Pieces that fit are Split's.
func SplitRendered(md string, limit, most int, size func(md string) int) []string {
	var out []string
	for _, p := range Split(md, limit) {
		out = append(out, refit(p, most, size)...)
	}
	return out
}

// refit splits piece p again until every part's size is within most.
func refit(p string, most int, size func(string) int) []string {
	n, units := size(p), Len(p)
	if n <= most || units <= 16 {
		return []string{p}
	}
	parts := Split(p, min(units-1, units*most/n))
	if len(parts) == 1 && parts[0] == p {
		return parts // cannot be cut any finer
	}
	var out []string
	for _, q := range parts {
		out = append(out, refit(q, most, size)...)
	}
	return out
}

// block is a paragraph-level unit of Markdown: text between blank lines,
// or a whole fenced code block.
type block struct {
	text  string
	fence string // opening fence line, when the block is a code block
}

// blocks splits md on blank lines outside fenced code blocks.
func blocks(md string) []block {
	var out []block
	var cur []string
	fence := ""
	flush := func(f string) {
		if len(cur) > 0 {
			out = append(out, block{text: strings.Join(cur, "\n"), fence: f})
		}
		cur = nil
	}
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		isFence := len(line)-len(trimmed) <= 3 && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"))
		switch {
		case fence == "" && isFence:
			flush("")
			fence = strings.TrimSpace(line)
			cur = append(cur, line)
		case fence != "" && isFence && strings.TrimSpace(trimmed)[:3] == fence[:3]:
			cur = append(cur, line)
			flush(fence)
			fence = ""
		case fence != "":
			cur = append(cur, line)
		case strings.TrimSpace(line) == "":
			flush("")
		default:
			cur = append(cur, line)
		}
	}
	flush(fence)
	return out
}

// fit cuts one block into pieces within limit.
func fit(b block, limit int) []string {
	if Len(b.text) <= limit {
		return []string{b.text}
	}
	if b.fence == "" {
		return packLines(strings.Split(b.text, "\n"), limit)
	}
	lines := strings.Split(b.text, "\n")
	body := lines[1:]
	closing := b.fence[:3]
	if n := len(body); n > 0 && strings.HasPrefix(strings.TrimSpace(body[n-1]), closing) {
		body = body[:n-1]
	}
	room := limit - Len(b.fence) - Len(closing) - 2
	if room < 8 {
		// The fence itself nearly fills a piece: reopening it in every
		// piece would leave no room for the code, so cut it as plain text.
		return packLines(lines, limit)
	}
	var out []string
	for _, p := range packLines(body, room) {
		out = append(out, b.fence+"\n"+p+"\n"+closing)
	}
	return out
}

// packLines joins lines into pieces within limit, cutting lines that are
// too long on their own.
func packLines(lines []string, limit int) []string {
	var parts []string
	for _, line := range lines {
		parts = append(parts, cutLine(line, limit)...)
	}
	return pack(parts, "\n", limit)
}

// pack joins pieces in order into as few as fit within limit, with sep
// between two joined pieces; a piece that is over limit alone stays
// alone.
func pack(pieces []string, sep string, limit int) []string {
	var out []string
	var cur strings.Builder
	for _, p := range pieces {
		switch {
		case cur.Len() == 0:
			cur.WriteString(p)
		case Len(cur.String())+Len(sep)+Len(p) <= limit:
			cur.WriteString(sep + p)
		default:
			out = append(out, cur.String())
			cur.Reset()
			cur.WriteString(p)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// cutLine cuts a line longer than limit at spaces, or anywhere when a
// word is longer than limit.
func cutLine(line string, limit int) []string {
	var out []string
	for Len(line) > limit {
		runes := []rune(line)
		// Find the longest prefix within limit.
		n, size := 0, 0
		for n < len(runes) && size+u16(runes[n]) <= limit {
			size += u16(runes[n])
			n++
		}
		if n == 0 {
			n = 1 // a rune wider than the limit still goes somewhere: always progress
		}
		cut := n
		for i := n; i > n/2; i-- {
			if runes[i-1] == ' ' {
				cut = i
				break
			}
		}
		out = append(out, strings.TrimRight(string(runes[:cut]), " "))
		line = strings.TrimLeft(string(runes[cut:]), " ")
	}
	if line != "" || len(out) == 0 {
		out = append(out, line)
	}
	return out
}

// Truncate returns s cut to at most n UTF-16 code units (the unit of Len
// and the limits above), the last of them "…" when it was cut: for a
// one-message preview (progress, tool hints) where a Split into several
// messages would be noise. A rune is never split.
func Truncate(s string, n int) string {
	if Len(s) <= n {
		return s
	}
	used := 1 // the ellipsis
	for i, r := range s {
		if used+u16(r) > n {
			return s[:i] + "…"
		}
		used += u16(r)
	}
	return s
}

// TruncateRendered is Truncate for a platform that counts what md renders
// to: size measures that in the platform's unit, and md is cut shorter, in
// proportion, until its size is within most (or it is down to 16 units).
// Text that fits comes back whole.
func TruncateRendered(md string, most int, size func(md string) int) string {
	for n := Len(md); ; {
		cut := Truncate(md, n)
		m := size(cut)
		if m <= most || n <= 16 {
			return cut
		}
		n = min(n-1, n*most/m)
	}
}
