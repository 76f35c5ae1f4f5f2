// Package jsonrepair turns the almost-JSON that models answer with into
// JSON: it drops reasoning blocks, code fences and prose around the
// object, and repairs trailing commas, single quotes, unquoted keys,
// Python literals, raw newlines and stray quotes inside strings, invalid
// escapes, and objects cut off before their end. It is nanobot's
// json_repair step, for one JSON object.
package jsonrepair

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Object decodes the first JSON object in text, repairing it if needed.
func Object(text string) (map[string]any, error) {
	var out map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &out); err == nil && out != nil {
		return out, nil
	}
	fixed, err := Repair(text)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(fixed), &out); err != nil {
		return nil, fmt.Errorf("jsonrepair: still not JSON after repair: %w", err)
	}
	if out == nil {
		return nil, ErrNoObject
	}
	return out, nil
}

var thinkBlock = regexp.MustCompile(`(?s)<think>.*?</think>`)

// Repair returns the first JSON object of text as valid JSON where it can.
func Repair(text string) (string, error) {
	text = thinkBlock.ReplaceAllString(text, "")
	text = stripFence(text)
	start := strings.IndexByte(text, '{')
	if start < 0 {
		return "", ErrNoObject
	}
	r := repairer{in: text[start:]}
	return r.run(), nil
}

// stripFence returns the inside of the first ``` fence, if there is one.
func stripFence(s string) string {
	i := strings.Index(s, "```")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	if nl := strings.IndexByte(rest, '\n'); nl >= 0 && !strings.Contains(rest[:nl], "{") {
		rest = rest[nl+1:] // language tag
	}
	if j := strings.Index(rest, "```"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

type repairer struct {
	in    string
	pos   int
	out   strings.Builder
	stack []byte
}

func (r *repairer) run() string {
	for r.pos < len(r.in) {
		c := r.in[r.pos]
		switch {
		case c == '"' || c == '\'':
			r.str(c)
			continue
		case c == '{' || c == '[':
			r.stack = append(r.stack, c)
			r.out.WriteByte(c)
		case c == '}' || c == ']':
			if len(r.stack) == 0 {
				r.pos++
				continue
			}
			r.dropTrailingComma()
			open := r.stack[len(r.stack)-1]
			r.stack = r.stack[:len(r.stack)-1]
			if open == '{' {
				r.out.WriteByte('}')
			} else {
				r.out.WriteByte(']')
			}
			r.pos++
			if len(r.stack) == 0 {
				return r.out.String() // prose after the object is ignored
			}
			continue
		case isIdentStart(c):
			r.word()
			continue
		default:
			r.out.WriteByte(c)
		}
		r.pos++
	}
	// Cut off: close what is open.
	r.dropTrailingComma()
	s := strings.TrimRight(r.out.String(), " \t\r\n")
	if strings.HasSuffix(s, ":") {
		s += "null"
	}
	r.out.Reset()
	r.out.WriteString(s)
	for i := len(r.stack) - 1; i >= 0; i-- {
		if r.stack[i] == '{' {
			r.out.WriteByte('}')
		} else {
			r.out.WriteByte(']')
		}
	}
	return r.out.String()
}

// str copies a string quoted by q as a double-quoted JSON string.
func (r *repairer) str(q byte) {
	r.pos++ // opening quote
	r.out.WriteByte('"')
	for r.pos < len(r.in) {
		c := r.in[r.pos]
		switch {
		case c == '\\':
			if r.pos+1 >= len(r.in) {
				r.pos++
				continue
			}
			n := r.in[r.pos+1]
			switch {
			case n == '\'' && q == '\'':
				r.out.WriteByte('\'')
			case strings.IndexByte(`"\/bfnrtu`, n) >= 0:
				r.out.WriteByte('\\')
				r.out.WriteByte(n)
			default:
				r.out.WriteString(`\\`)
				r.out.WriteByte(n)
			}
			r.pos += 2
			continue
		case c == q && r.closes():
			r.out.WriteByte('"')
			r.pos++
			return
		case c == '"':
			r.out.WriteString(`\"`)
		case c == '\n':
			r.out.WriteString(`\n`)
		case c == '\r':
			r.out.WriteString(`\r`)
		case c == '\t':
			r.out.WriteString(`\t`)
		case c < 0x20:
			fmt.Fprintf(&r.out, `\u%04x`, c)
		default:
			r.out.WriteByte(c)
		}
		r.pos++
	}
	r.out.WriteByte('"') // cut off inside a string
}

// closes reports whether the quote at pos ends its string: what follows
// is the end, or a ',', ':', '}' or ']' after optional spaces.
func (r *repairer) closes() bool {
	for i := r.pos + 1; i < len(r.in); i++ {
		switch r.in[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case ',', ':', '}', ']':
			return true
		default:
			return false
		}
	}
	return true
}

// word copies a bare word: a JSON literal, a Python literal, or an
// unquoted key.
func (r *repairer) word() {
	end := r.pos
	for end < len(r.in) && isIdent(r.in[end]) {
		end++
	}
	w := r.in[r.pos:end]
	r.pos = end
	switch w {
	case "true", "false", "null":
		r.out.WriteString(w)
		return
	case "True":
		r.out.WriteString("true")
		return
	case "False":
		r.out.WriteString("false")
		return
	case "None":
		r.out.WriteString("null")
		return
	}
	j := end
	for j < len(r.in) && (r.in[j] == ' ' || r.in[j] == '\t') {
		j++
	}
	if j < len(r.in) && r.in[j] == ':' {
		r.out.WriteString(`"` + w + `"`)
		return
	}
	r.out.WriteString(w)
}

func (r *repairer) dropTrailingComma() {
	s := r.out.String()
	t := strings.TrimRight(s, " \t\r\n")
	if strings.HasSuffix(t, ",") {
		r.out.Reset()
		r.out.WriteString(t[:len(t)-1])
	}
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
