package patch

import (
	"fmt"
	"strings"
)

type opKind int

type chunk struct {
	anchor    string
	ops       []op     // the chunk's lines in order
	oldLines  []string // context and removed lines: what must match
	endOfFile bool
	adds      int
	dels      int
}

// op is one line of a chunk: ' ' context, '-' removed, '+' added.
type op struct {
	kind byte
	text string
}

type section struct {
	kind    opKind
	path    string
	moveTo  string
	content []string // opAdd
	chunks  []chunk  // opUpdate
}

// Parse reads a patch into its sections.
func Parse(text string) ([]section, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	// Models sometimes wrap the patch in a code fence.
	for len(lines) > 0 && (strings.TrimSpace(lines[0]) == "" || strings.HasPrefix(strings.TrimSpace(lines[0]), "```")) {
		lines = lines[1:]
	}
	for len(lines) > 0 && (strings.TrimSpace(lines[len(lines)-1]) == "" || strings.HasPrefix(strings.TrimSpace(lines[len(lines)-1]), "```")) {
		lines = lines[:len(lines)-1]
	}
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "*** Begin Patch" {
		return nil, fmt.Errorf("%w: the patch must start with \"*** Begin Patch\"", ErrBadPatch)
	}
	if strings.TrimSpace(lines[len(lines)-1]) != "*** End Patch" {
		return nil, fmt.Errorf("%w: the patch must end with \"*** End Patch\"", ErrBadPatch)
	}
	lines = lines[1 : len(lines)-1]
	var out []section
	for i := 0; i < len(lines); {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "*** Add File: "):
			s := section{kind: opAdd, path: strings.TrimSpace(strings.TrimPrefix(line, "*** Add File: "))}
			i++
			for ; i < len(lines) && !strings.HasPrefix(lines[i], "*** "); i++ {
				if !strings.HasPrefix(lines[i], "+") {
					return nil, fmt.Errorf("%w: line %d: every line of an added file starts with \"+\": %q", ErrBadPatch, i+2, lines[i])
				}
				s.content = append(s.content, lines[i][1:])
			}
			out = append(out, s)
		case strings.HasPrefix(line, "*** Delete File: "):
			out = append(out, section{kind: opDelete, path: strings.TrimSpace(strings.TrimPrefix(line, "*** Delete File: "))})
			i++
		case strings.HasPrefix(line, "*** Update File: "):
			s := section{kind: opUpdate, path: strings.TrimSpace(strings.TrimPrefix(line, "*** Update File: "))}
			i++
			if i < len(lines) && strings.HasPrefix(lines[i], "*** Move to: ") {
				s.moveTo = strings.TrimSpace(strings.TrimPrefix(lines[i], "*** Move to: "))
				i++
			}
			var cur *chunk
			for ; i < len(lines); i++ {
				l := lines[i]
				if strings.HasPrefix(l, "*** End of File") {
					if cur == nil {
						return nil, fmt.Errorf("%w: line %d: \"*** End of File\" without a chunk before it", ErrBadPatch, i+2)
					}
					cur.endOfFile = true
					continue
				}
				if strings.HasPrefix(l, "*** ") {
					break
				}
				if strings.HasPrefix(l, "@@") {
					s.chunks = append(s.chunks, chunk{anchor: strings.TrimSpace(strings.TrimPrefix(l, "@@"))})
					cur = &s.chunks[len(s.chunks)-1]
					continue
				}
				if cur == nil {
					s.chunks = append(s.chunks, chunk{})
					cur = &s.chunks[len(s.chunks)-1]
				}
				if l == "" {
					l = " " // an empty context line whose space was lost
				}
				switch l[0] {
				case ' ':
					cur.ops = append(cur.ops, op{' ', l[1:]})
					cur.oldLines = append(cur.oldLines, l[1:])
				case '-':
					cur.ops = append(cur.ops, op{'-', l[1:]})
					cur.oldLines = append(cur.oldLines, l[1:])
					cur.dels++
				case '+':
					cur.ops = append(cur.ops, op{'+', l[1:]})
					cur.adds++
				default:
					return nil, fmt.Errorf("%w: line %d: a line of an update starts with \" \", \"-\" or \"+\": %q", ErrBadPatch, i+2, l)
				}
			}
			if len(s.chunks) == 0 && s.moveTo == "" {
				return nil, fmt.Errorf("%w: \"*** Update File: %s\" has no changes", ErrBadPatch, s.path)
			}
			out = append(out, s)
		case strings.TrimSpace(line) == "":
			i++
		default:
			return nil, fmt.Errorf("%w: line %d: expected \"*** Add File:\", \"*** Delete File:\" or \"*** Update File:\", got %q", ErrBadPatch, i+2, line)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the patch changes nothing", ErrBadPatch)
	}
	for _, s := range out {
		if s.path == "" {
			return nil, fmt.Errorf("%w: a section has an empty path", ErrBadPatch)
		}
	}
	return out, nil
}
