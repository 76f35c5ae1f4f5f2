package toolschema

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// describe turns a validation error into one problem per failed rule.
func describe(ve *jsonschema.ValidationError, doc map[string]any) []Problem {
	var out []Problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		out = append(out, leafProblems(e, doc)...)
	}
	walk(ve)
	if len(out) == 0 {
		out = []Problem{{Message: "arguments do not match the tool's schema"}}
	}
	slices.SortFunc(out, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Message, b.Message))
	})
	return slices.CompactFunc(out, func(a, b Problem) bool { return a == b })
}

func leafProblems(e *jsonschema.ValidationError, doc map[string]any) []Problem {
	loc := e.InstanceLocation
	path := joinPath(loc)
	arg := func(format string, a ...any) []Problem {
		subject := "arguments"
		if path != "" {
			subject = fmt.Sprintf("argument %q", path)
		}
		return []Problem{{Path: path, Message: subject + ": " + fmt.Sprintf(format, a...)}}
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		var ps []Problem
		for _, m := range k.Missing {
			p := joinPath(append(slices.Clone(loc), m))
			ps = append(ps, Problem{Path: p, Message: fmt.Sprintf("missing required argument %q", p)})
		}
		return ps
	case *kind.AdditionalProperties:
		var ps []Problem
		allowed := allowedProperties(doc, loc)
		for _, name := range k.Properties {
			p := joinPath(append(slices.Clone(loc), name))
			msg := fmt.Sprintf("unknown argument %q", p)
			if len(allowed) > 0 {
				msg += "; allowed: " + strings.Join(allowed, ", ")
			}
			ps = append(ps, Problem{Path: p, Message: msg})
		}
		return ps
	case *kind.Type:
		return arg("must be %s, got %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = display(w)
		}
		if len(want) == 1 {
			return arg("must be %s", want[0])
		}
		return arg("must be one of %s", strings.Join(want, ", "))
	case *kind.Const:
		return arg("must be %s", display(k.Want))
	case *kind.Minimum:
		return arg("must be >= %s", ratString(k.Want))
	case *kind.Maximum:
		return arg("must be <= %s", ratString(k.Want))
	case *kind.ExclusiveMinimum:
		return arg("must be > %s", ratString(k.Want))
	case *kind.ExclusiveMaximum:
		return arg("must be < %s", ratString(k.Want))
	case *kind.MultipleOf:
		return arg("must be a multiple of %s", ratString(k.Want))
	case *kind.MinLength:
		return arg("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		return arg("must be at most %d characters long", k.Want)
	case *kind.Pattern:
		return arg("must match the pattern %q", k.Want)
	case *kind.Format:
		return arg("must be a valid %s", k.Want)
	case *kind.MinItems:
		return arg("must have at least %d items", k.Want)
	case *kind.MaxItems:
		return arg("must have at most %d items", k.Want)
	case *kind.UniqueItems:
		return arg("items must be unique (items %d and %d are equal)", k.Duplicates[0], k.Duplicates[1])
	case *kind.MinProperties:
		return arg("must have at least %d properties", k.Want)
	case *kind.MaxProperties:
		return arg("must have at most %d properties", k.Want)
	case *kind.FalseSchema:
		return arg("is not allowed")
	}
	return arg("%s", e.ErrorKind.LocalizedString(message.NewPrinter(language.English)))
}

// joinPath renders an instance location: keys joined with dots, array
// indexes in brackets.
func joinPath(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// allowedProperties lists the properties the schema declares for the
// object at loc, when loc is reachable through plain properties/items.
func allowedProperties(doc map[string]any, loc []string) []string {
	node := doc
	for _, tok := range loc {
		if props, ok := node["properties"].(map[string]any); ok {
			if next, ok := props[tok].(map[string]any); ok {
				node = next
				continue
			}
		}
		if items, ok := node["items"].(map[string]any); ok {
			node = items
			continue
		}
		return nil
	}
	props, _ := node["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func display(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}
