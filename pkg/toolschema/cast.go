package toolschema

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// schemaTypes returns the "type" keyword of a schema node as a list.
func schemaTypes(node map[string]any) []string {
	switch t := node["type"].(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func allows(types []string, t string) bool {
	for _, x := range types {
		if x == t || (t == "integer" && x == "number") {
			return true
		}
	}
	return false
}

// soleType is the one non-null type a node allows, or "" when it allows
// none or several: casting is only done when the target is unambiguous.
func soleType(types []string) string {
	sole := ""
	for _, t := range types {
		if t == "null" {
			continue
		}
		if sole != "" {
			return ""
		}
		sole = t
	}
	return sole
}

// cast converts v towards what node expects where that is safe, and fills
// in defaults of objects. It never fails: what it cannot convert is left
// for the validator to report.
func cast(node map[string]any, v any) any {
	if node == nil {
		return v
	}
	types := schemaTypes(node)
	sole := soleType(types)
	switch val := v.(type) {
	case string:
		if len(types) == 0 || allows(types, "string") {
			return val
		}
		return castString(node, sole, val)
	case json.Number:
		switch {
		case allows(types, "integer") && !allows(types, "number"):
			if n, ok := integral(val); ok {
				return n
			}
			return val
		case len(types) == 0 || allows(types, "number"):
			return val
		case sole == "string":
			return val.String()
		}
		return val
	case bool:
		if sole == "string" {
			return strconv.FormatBool(val)
		}
		return val
	case []any:
		items, _ := node["items"].(map[string]any)
		if items == nil {
			return val
		}
		for i := range val {
			val[i] = cast(items, val[i])
		}
		return val
	case map[string]any:
		castObject(node, val)
		return val
	}
	return v
}

func castString(node map[string]any, sole, s string) any {
	t := strings.TrimSpace(s)
	switch sole {
	case "integer":
		if n, ok := integral(json.Number(t)); ok {
			return n
		}
	case "number":
		if f, err := strconv.ParseFloat(t, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && isJSONNumber(t) {
			return json.Number(t)
		}
	case "boolean":
		switch strings.ToLower(t) {
		case "true", "yes", "1":
			return true
		case "false", "no", "0":
			return false
		}
	case "array":
		if strings.HasPrefix(t, "[") {
			if v, err := decodeJSON(t); err == nil {
				if _, sane := numbersInRange(v, nil); !sane {
					return s
				}
				if arr, ok := v.([]any); ok {
					return cast(node, arr)
				}
			}
		}
	case "object":
		if strings.HasPrefix(t, "{") {
			if v, err := decodeJSON(t); err == nil {
				if _, sane := numbersInRange(v, nil); !sane {
					return s
				}
				if obj, ok := v.(map[string]any); ok {
					return cast(node, obj)
				}
			}
		}
	}
	return s
}

// isJSONNumber reports whether s is written as a JSON number (so that
// "0x10", "Inf" or "1_000" are not taken for numbers).
func isJSONNumber(s string) bool {
	if !saneNumber(s) {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil && !strings.ContainsAny(s, "\"")
}

// integral returns n as an integer literal if it is a JSON number with an
// integral value ("60", "60.0", "6e1").
func integral(n json.Number) (json.Number, bool) {
	s := n.String()
	if !isJSONNumber(s) {
		return n, false
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return json.Number(s), true
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() {
		return n, false
	}
	return json.Number(r.Num().String()), true
}

func castObject(node map[string]any, obj map[string]any) {
	props, _ := node["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := node["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	for k, v := range obj {
		ps, _ := props[k].(map[string]any)
		if v == nil && ps != nil && !required[k] {
			if ts := schemaTypes(ps); len(ts) > 0 && !allows(ts, "null") {
				// An optional argument sent as null means "not given".
				delete(obj, k)
				continue
			}
		}
		if ps != nil {
			obj[k] = cast(ps, v)
		}
	}
	for k, p := range props {
		ps, _ := p.(map[string]any)
		if ps == nil {
			continue
		}
		if _, present := obj[k]; present {
			continue
		}
		if d, ok := ps["default"]; ok {
			obj[k] = cast(ps, deepCopy(d))
		}
	}
}

func deepCopy(v any) any {
	switch val := v.(type) {
	case []any:
		out := make([]any, len(val))
		for i, x := range val {
			out[i] = deepCopy(x)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(val))
		for k, x := range val {
			out[k] = deepCopy(x)
		}
		return out
	}
	return v
}

// normalize replaces json.Number with int64 (integral values that fit) or
// float64 (finite values), keeping json.Number only for values neither
// can hold.
func normalize(v any) any {
	switch val := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(val.String(), 10, 64); err == nil {
			return i
		}
		if f, err := strconv.ParseFloat(val.String(), 64); err == nil && !math.IsInf(f, 0) {
			return f
		}
		return val
	case []any:
		for i := range val {
			val[i] = normalize(val[i])
		}
		return val
	case map[string]any:
		for k := range val {
			val[k] = normalize(val[k])
		}
		return val
	}
	return v
}
