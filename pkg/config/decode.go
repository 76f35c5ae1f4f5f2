package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Section decodes the raw section name (e.g. "tools") strictly into v,
// which should hold the owner's defaults. A missing section leaves v as is.
func (f *File) Section(name string, v any) error {
	var raw json.RawMessage
	switch name {
	case "worker":
		raw = f.Worker
	case "tools":
		raw = f.Tools
	case "channels":
		raw = f.Channels
	case "memory":
		raw = f.Memory
	case "gateway":
		raw = f.Gateway
	case "schedule":
		raw = f.Schedule
	default:
		return fmt.Errorf("config: no section %q", name)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return decodeStrict(raw, v, name)
}

// DecodeStrict decodes data, the value at key path section (e.g.
// "channels.web"; "" for the whole file), into v refusing unknown keys,
// and names an offending key with its full path, in the file's terms.
// Owners of sections that decode their parts one by one use it.
func DecodeStrict(data []byte, v any, section string) error { return decodeStrict(data, v, section) }

func decodeStrict(data []byte, v any, section string) error {
	t := reflect.TypeOf(v)
	data, renamed, unknown, err := prepare(data, t, section)
	if err != nil {
		return err
	}
	errs := make([]error, 0, len(unknown)+1)
	for _, k := range unknown {
		key := renamed.written(k.path)
		if hint, ok := hintFor(k.in, lastKey(key)); ok {
			errs = append(errs, Invalid(key, "%s", hint))
			continue
		}
		errs = append(errs, unknownKeyError(key, k.fold))
	}
	// encoding/json decodes the rest past a mistyped value but reports
	// only the first: each one is named, made null (which decodes to
	// nothing) and the decode done again, until none is left.
	for range maxMistyped {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err := dec.Decode(v)
		if err == nil {
			break
		}
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) {
			errs = append(errs, &Error{Key: section, Err: err})
			break
		}
		key := keyPath(t, typeErr.Field)
		// The offset's path has map keys, which Field lacks (and for a
		// map's value, the key within the map); it is wrong when a type's
		// own UnmarshalJSON failed (an offset into its value).
		at := keyAt(data, typeErr.Offset)
		located := at != "" && strings.Contains("."+strings.ReplaceAll(at, "[", ".[")+".", "."+lastKey(key)+".")
		if located {
			key = at
		}
		errs = append(errs, Invalid(renamed.written(join(section, key)), "must be %s, got %s", jsonKind(typeErr.Type), jsonValueKind(typeErr.Value)))
		// Only a value found where it is can be taken out; otherwise the
		// first is all that is named.
		if !located {
			break
		}
		if data = withoutValueAt(data, typeErr.Offset); data == nil {
			break
		}
	}
	return joinErrors(errs...)
}

// maxMistyped bounds the mistyped values one decode names.
const maxMistyped = 100

// withoutValueAt returns data with the value [keyAt] finds at offset made
// null, or nil when there is none to take out (the whole document).
func withoutValueAt(data []byte, offset int64) []byte {
	tree, ok := parseTree(data)
	if !ok || !nullAt(tree, segmentsAt(data, offset)) {
		return nil
	}
	out, err := json.Marshal(tree)
	if err != nil {
		return nil
	}
	return out
}

// UnknownKey is the error naming key (its whole path), which is none of
// known, for a section's owner that matches its keys itself: when key
// differs from one of known only in case, it says which.
func UnknownKey(key string, known ...string) error {
	last := lastKey(key)
	for _, k := range known {
		if strings.EqualFold(k, last) {
			return unknownKeyError(key, k)
		}
	}
	return unknownKeyError(key, "")
}

// unknownKeyError names key, unknown, and the key it differs from only
// in case, if any.
func unknownKeyError(key, fold string) error {
	if fold != "" {
		return Invalid(key, "unknown key; keys are case-sensitive: did you mean %s?", fold)
	}
	return Invalid(key, "unknown key (check spelling; keys are camelCase)")
}

// prepare readies data, decoded for t at path, for the strict decode,
// in one pass over it: nanobot's snake_case keys renamed (see
// [camelKeys]), and the keys t has no field for left out and returned.
// They are found before encoding/json sees them: it names one only by its
// last element and takes a key that differs from a field's only in case
// ("MODEL"). Every unknown key is named at once: a file pasted from
// nanobot often has several, and a start-up per key is a slow way to
// learn them. Data that is not JSON is returned as it is, for the decode
// to report.
func prepare(data []byte, t reflect.Type, path string) ([]byte, renames, []unknownKey, error) {
	tree, ok := parseTree(data)
	if !ok {
		return data, nil, nil, nil
	}
	renamed, changed, err := camelKeys(tree, t, path)
	if err != nil {
		return nil, nil, nil, err
	}
	unknown := dropUnknown(tree, t, path)
	if !changed && len(unknown) == 0 {
		return data, renamed, nil, nil
	}
	out, err := json.Marshal(tree)
	if err != nil {
		return nil, nil, nil, &Error{Key: path, Err: err}
	}
	return out, renamed, unknown, nil
}

// parseTree decodes data into maps, lists and json.Number (re-encoded as
// written: no float rounding); false when it is not JSON.
func parseTree(data []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	return tree, dec.Decode(&tree) == nil
}
