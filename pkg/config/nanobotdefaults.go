package config

import (
	"encoding/json"
	"reflect"
)

// NanobotDefaults is implemented by a section's Config type with keys of
// [KeyHints] that nanobot writes into every config.json with a value of
// its own (`nanobot onboard` writes its whole schema): the map gives the
// values nanobot's versions write. A key that holds one was not set by
// its user, so it is dropped as an unset one is, and nanofleet's own
// behaviour for it applies (the hint's); any other value is refused with
// the key's hint. Without this, the file nanobot wrote failed on keys its
// user never set.
type NanobotDefaults interface {
	NanobotDefaults() map[string][]any
}

var nanobotDefaults = reflect.TypeFor[NanobotDefaults]()

// AsksNothing says whether raw, the value of key in an object decoded for
// v's type, asks for nothing: it is empty (null, "", [], {}) or a value
// nanobot writes for the key by default (see [NanobotDefaults]). The
// strict decode drops such a key when the type has a hint for it; an
// owner that matches its keys itself (channels.FromFile) asks this.
func AsksNothing(v any, key string, raw []byte) bool {
	tree, ok := parseTree(raw)
	return ok && (empty(tree) || isNanobotDefault(reflect.TypeOf(v), key, tree))
}

// isNanobotDefault says whether v, the value of key (either case style)
// in an object decoded for t, is the default nanobot writes for it.
func isNanobotDefault(t reflect.Type, key string, v any) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || !t.Implements(nanobotDefaults) {
		return false
	}
	v = camelTree(v)
	for _, def := range reflect.Zero(t).Interface().(NanobotDefaults).NanobotDefaults()[CamelCase(key)] {
		data, err := json.Marshal(def)
		if err != nil {
			continue
		}
		if want, ok := parseTree(data); ok && sameJSON(v, want) {
			return true
		}
	}
	return false
}

// camelTree is v with the keys of its objects in camelCase, as nanobot
// reads them below a key nanofleet has no field for.
func camelTree(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[CamelCase(k)] = camelTree(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = camelTree(e)
		}
		return out
	}
	return v
}

// sameJSON says whether two decoded JSON values are equal, numbers by
// value (nanobot writes 1.0 where the default says 1).
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		x, errA := a.Float64()
		y, errB := b.Float64()
		return errA == nil && errB == nil && x == y
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !sameJSON(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	default: // nil, bool, string
		return a == b
	}
}
