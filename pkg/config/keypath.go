package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// encoding/json names neither the path of an unknown key nor a mistyped
// value in terms a user of the file knows; these helpers do, by walking
// the decoded document beside the Go type it is decoded into.

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawMessage      = reflect.TypeFor[json.RawMessage]()
)

// unknownKey is a key of the file that its Go type has no field for: its
// dotted path, the struct type it is missing from, and the key of the
// field it differs from only in case, if any ("model" for "MODEL").
type unknownKey struct {
	path string
	in   reflect.Type
	fold string
}

// dropUnknown removes from tree, and returns in sorted order, every key
// that t has no field for. Values decoded by their own UnmarshalJSON, raw
// sections and free-form values are not looked into.
func dropUnknown(tree any, t reflect.Type, path string) []unknownKey {
	var out []unknownKey
	walkUnknown(tree, t, path, func(k unknownKey) { out = append(out, k) })
	return out
}

func walkUnknown(tree any, t reflect.Type, path string, found func(unknownKey)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage || reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return
	}
	switch v := tree.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				f, ok := fieldFor(t, k)
				if !ok {
					fold, _ := fieldFold(t, k)
					found(unknownKey{join(path, k), t, fold})
					delete(v, k)
					continue
				}
				walkUnknown(v[k], f.Type, join(path, k), found)
			}
		case reflect.Map:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walkUnknown(v[k], t.Elem(), join(path, k), found)
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range v {
				walkUnknown(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", found)
			}
		}
	}
}

// fieldFor finds the field key decodes into: by its json tag or, without
// one, its Go name, embedded structs included, a field of t winning over
// one of an embedded struct of the same name. Unlike encoding/json, which
// also takes a key that differs only in case, it matches exactly: the
// file's keys are case-sensitive.
func fieldFor(t reflect.Type, key string) (reflect.StructField, bool) {
	f, _, ok := findField(t, func(name string) bool { return name == key })
	return f, ok
}

// fieldFold returns the key of t's field that key differs from only in
// case ("turnsPerWorker" for "TURNSPERWORKER").
func fieldFold(t reflect.Type, key string) (string, bool) {
	_, name, ok := findField(t, func(name string) bool { return strings.EqualFold(name, key) })
	return name, ok
}

// findField returns the first field of t, or else of its embedded
// structs, whose key match accepts, and that key.
func findField(t reflect.Type, match func(key string) bool) (reflect.StructField, string, bool) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		if match(name) {
			return f, name, true
		}
	}
	for _, et := range embedded {
		if f, name, ok := findField(et, match); ok {
			return f, name, true
		}
	}
	return reflect.StructField{}, "", false
}

// jsonKind says what a Go type expects in the file's terms.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another kind of value"
}

// jsonValueKind names a JSON value kind as encoding/json reports it
// ("string", "number 1.5", "bool", "object", "array").
func jsonValueKind(v string) string {
	switch {
	case strings.HasPrefix(v, "number"):
		return "a number"
	case v == "string":
		return "a string"
	case v == "bool":
		return "true or false"
	case v == "array":
		return "a list"
	case v == "object":
		return "an object"
	}
	return v
}

// keyPath turns the dotted field path of a *json.UnmarshalTypeError for
// t into the key's path, leaving out the names of embedded structs.
func keyPath(t reflect.Type, goPath string) string {
	var keys []string
	segs := strings.Split(goPath, ".")
	for len(segs) > 0 {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		s := segs[0]
		switch t.Kind() {
		case reflect.Struct:
			if f, ok := t.FieldByName(s); ok && f.Anonymous && f.Tag.Get("json") == "" {
				t, segs = f.Type, segs[1:]
				continue
			}
			f, ok := fieldFor(t, s)
			if !ok {
				return strings.Join(append(keys, segs...), ".")
			}
			t = f.Type
		case reflect.Map, reflect.Slice, reflect.Array:
			t = t.Elem()
		default:
			return strings.Join(append(keys, segs...), ".")
		}
		keys, segs = append(keys, s), segs[1:]
	}
	return strings.Join(keys, ".")
}

func join(path, key string) string {
	if path == "" || key == "" {
		return path + key
	}
	return path + "." + key
}

// keyAt returns the path of the first value of data that ends at or after
// offset (a *json.UnmarshalTypeError's Offset), or "" for the whole
// document. Unlike the error's Field, it includes map keys.
func keyAt(data []byte, offset int64) string {
	var b strings.Builder
	for _, s := range segmentsAt(data, offset) {
		if i, ok := s.(int); ok {
			b.WriteString("[" + strconv.Itoa(i) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.(string))
	}
	return b.String()
}

// segmentsAt is [keyAt]'s path as its steps: a string for an object's
// key, an int for a list's index; none for the whole document.
func segmentsAt(data []byte, offset int64) []any {
	type frame struct {
		obj     bool
		wantKey bool
		key     string
		i       int
	}
	var stack []*frame
	path := func() []any {
		out := make([]any, 0, len(stack))
		for _, f := range stack {
			if f.obj {
				out = append(out, f.key)
			} else {
				out = append(out, f.i)
			}
		}
		return out
	}
	valueDone := func() {
		if n := len(stack); n > 0 {
			if f := stack[n-1]; f.obj {
				f.wantKey = true
			} else {
				f.i++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			valueDone()
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			stack[n-1].key, stack[n-1].wantKey = tok.(string), false
			continue
		}
		if dec.InputOffset() >= offset {
			return path()
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{obj: d == '{', wantKey: d == '{'})
			continue
		}
		valueDone()
	}
}

// nullAt sets the value at path in tree (as decoded into any) to null,
// and reports whether there was one (the whole document is not).
func nullAt(tree any, path []any) bool {
	if len(path) == 0 {
		return false
	}
	for _, step := range path[:len(path)-1] {
		switch v := tree.(type) {
		case map[string]any:
			k, ok := step.(string)
			if !ok {
				return false
			}
			tree = v[k]
		case []any:
			i, ok := step.(int)
			if !ok || i >= len(v) {
				return false
			}
			tree = v[i]
		default:
			return false
		}
	}
	switch v := tree.(type) {
	case map[string]any:
		k, ok := path[len(path)-1].(string)
		if _, found := v[k]; !ok || !found || v[k] == nil {
			return false
		}
		v[k] = nil
		return true
	case []any:
		i, ok := path[len(path)-1].(int)
		if !ok || i >= len(v) || v[i] == nil {
			return false
		}
		v[i] = nil
		return true
	}
	return false
}

func lastKey(path string) string { return path[strings.LastIndexByte(path, '.')+1:] }
