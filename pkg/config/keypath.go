package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// encoding/json names an unknown key only by its last element, and a
// mistyped one by a path that includes the Go name of every embedded
// struct; the functions below recover the key's path in the file.

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// opaque reports whether t decodes itself, so its keys are not ours to
// check.
func opaque(t reflect.Type) bool {
	return t.Kind() == reflect.Interface || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}

// jsonFields returns t's fields by their JSON name, the fields of an
// untagged embedded struct among them, as encoding/json sees them.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	fields := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			for n, sub := range jsonFields(ft) {
				if _, shadowed := fields[n]; !shadowed {
					fields[n] = sub
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		fields[cmp.Or(name, f.Name)] = f
	}
	return fields
}

// field finds key among fields as encoding/json does: exactly, else
// ignoring case.
func field(fields map[string]reflect.StructField, key string) (reflect.StructField, bool) {
	if f, ok := fields[key]; ok {
		return f, true
	}
	for name, f := range fields {
		if strings.EqualFold(name, key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// unknownKey returns the path of the first key of tree (decoded JSON) that
// t has no field for, or "".
func unknownKey(tree any, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if opaque(t) {
		return ""
	}
	switch t.Kind() {
	case reflect.Struct:
		m, _ := tree.(map[string]any)
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			f, ok := field(fields, k)
			if !ok {
				return join(path, k)
			}
			if p := unknownKey(m[k], f.Type, join(path, k)); p != "" {
				return p
			}
		}
	case reflect.Map:
		m, _ := tree.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if p := unknownKey(m[k], t.Elem(), join(path, k)); p != "" {
				return p
			}
		}
	case reflect.Slice, reflect.Array:
		s, _ := tree.([]any)
		for i, v := range s {
			if p := unknownKey(v, t.Elem(), path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	}
	return ""
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
			f, ok := field(jsonFields(t), s)
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
	if path == "" {
		return key
	}
	return path + "." + key
}

// keyAt returns the path of the first value of data that ends at or after
// offset (a *json.UnmarshalTypeError's Offset), or "" for the whole
// document. Unlike the error's Field, it includes map keys.
func keyAt(data []byte, offset int64) string {
	type frame struct {
		obj     bool
		wantKey bool
		key     string
		i       int
	}
	var stack []*frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if !f.obj {
				b.WriteString("[" + strconv.Itoa(f.i) + "]")
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		return b.String()
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
			return ""
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

func lastKey(path string) string { return path[strings.LastIndexByte(path, '.')+1:] }
