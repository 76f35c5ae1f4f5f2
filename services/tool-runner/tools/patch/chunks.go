package patch

import (
	"fmt"
	"strings"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools/linematch"
)

// applyChunks applies an update's chunks to content.
func applyChunks(p, content string, chunks []chunk) (string, int, int, error) {
	crlf := strings.Contains(content, "\r\n")
	content = strings.ReplaceAll(content, "\r\n", "\n")
	trailingNL := strings.HasSuffix(content, "\n")
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	if content == "" {
		lines = nil
	}
	cursor, added, removed := 0, 0, 0
	for n, ch := range chunks {
		if ch.anchor != "" {
			i := find(lines, []string{ch.anchor}, cursor, false)
			if i < 0 {
				return "", 0, 0, fmt.Errorf("%w: chunk %d of %s: the line after @@ (%q) is not in the file after the previous chunk", ErrBadPatch, n+1, p, ch.anchor)
			}
			cursor = i + 1
		}
		var at int
		if len(ch.oldLines) == 0 {
			at = len(lines)
			if ch.anchor != "" {
				at = cursor
			}
		} else if at = find(lines, ch.oldLines, cursor, ch.endOfFile); at < 0 {
			return "", 0, 0, fmt.Errorf("%w: chunk %d of %s does not match the file; these lines were not found in order:\n%s\nRead the file again and copy context and removed lines exactly", ErrBadPatch, n+1, p, strings.Join(ch.oldLines, "\n"))
		}
		next := make([]string, 0, len(lines)+ch.adds)
		next = append(next, lines[:at]...)
		i := at
		for _, o := range ch.ops {
			switch o.kind {
			case ' ': // keep the file's own line (it may differ in whitespace)
				next = append(next, lines[i])
				i++
			case '-':
				i++
			case '+':
				next = append(next, o.text)
			}
		}
		cursor = len(next)
		next = append(next, lines[i:]...)
		lines = next
		added += ch.adds
		removed += ch.dels
	}
	out := strings.Join(lines, "\n")
	if trailingNL || content == "" {
		out += "\n"
	}
	if crlf {
		out = strings.ReplaceAll(out, "\n", "\r\n")
	}
	return out, added, removed, nil
}

// find returns the first index >= from where want matches lines, trying
// exact, then trailing-whitespace-insensitive, then whitespace-insensitive
// comparison; with eof, a match at the very end is preferred.
func find(lines, want []string, from int, eof bool) int {
	norms := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimRight(s, " \t") },
		strings.TrimSpace,
	}
	for _, norm := range norms {
		if eof {
			if at := len(lines) - len(want); at >= from && equalLines(lines[at:], want, norm) {
				return at
			}
		}
		if at := linematch.Index(normalized(lines, norm), normalized(want, norm), from); at >= 0 {
			return at
		}
	}
	return -1
}

func normalized(lines []string, norm func(string) string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = norm(l)
	}
	return out
}

func equalLines(a, b []string, norm func(string) string) bool {
	for i := range b {
		if norm(a[i]) != norm(b[i]) {
			return false
		}
	}
	return true
}
