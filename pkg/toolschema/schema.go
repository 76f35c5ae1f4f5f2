package toolschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const schemaURL = "mem:///nanofleet/tool-arguments.json"

// Schema is a compiled arguments schema. It is safe for concurrent use.
type Schema struct {
	doc      map[string]any
	compiled *jsonschema.Schema
}

// Compile compiles a tool's parameters schema. An empty schema means a tool
// without arguments.
func Compile(params json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(params)) == 0 {
		params = json.RawMessage(`{"type":"object"}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the schema must be a JSON object", ErrInvalidSchema)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	return &Schema{doc: obj, compiled: compiled}, nil
}

// MustCompile is [Compile] for schemas written in code; it panics on error.
func MustCompile(params json.RawMessage) *Schema {
	s, err := Compile(params)
	if err != nil {
		panic(err)
	}
	return s
}

// Parse compiles schema and parses raw against it; see [Schema.Parse].
// Callers that parse many calls should [Compile] once.
func Parse(schema json.RawMessage, raw string) (map[string]any, error) {
	s, err := Compile(schema)
	if err != nil {
		return nil, err
	}
	return s.Parse(raw)
}

// Parse decodes raw (a JSON object, a JSON string holding one, or blank),
// casts values where the schema makes it safe, applies defaults and
// validates. Every error matches [ErrInvalidArguments]; an *ArgumentError
// lists each problem with the argument's path.
func (s *Schema) Parse(raw string) (map[string]any, error) {
	v, err := decodeArguments(raw)
	if err != nil {
		return nil, err
	}
	v = cast(s.doc, v)
	if err := s.compiled.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return nil, &ArgumentError{Problems: describe(ve, s.doc)}
		}
		return nil, argError("", "arguments: "+err.Error())
	}
	out, ok := normalize(v).(map[string]any)
	if !ok {
		return nil, argError("", "arguments must be a JSON object")
	}
	return out, nil
}

// decodeArguments reads the model's arguments into generic JSON values
// with numbers kept as json.Number.
func decodeArguments(raw string) (any, error) {
	text := strings.TrimSpace(raw)
	if text == "" {
		return map[string]any{}, nil
	}
	v, err := decodeJSON(text)
	if err != nil {
		return nil, argError("", fmt.Sprintf("arguments are not valid JSON (%v); send a JSON object such as {\"path\": \"notes.md\"}", err))
	}
	// Some models send the object JSON-encoded inside a string.
	if str, ok := v.(string); ok {
		inner := strings.TrimSpace(str)
		if inner == "" {
			return map[string]any{}, nil
		}
		if v, err = decodeJSON(inner); err != nil {
			return nil, argError("", "arguments are a JSON string that does not hold a JSON object; send a JSON object")
		}
	}
	if v == nil {
		return map[string]any{}, nil
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, argError("", fmt.Sprintf("arguments must be a JSON object, got %s", jsonType(v)))
	}
	if path, ok := numbersInRange(v, nil); !ok {
		return nil, argError(joinPath(path), fmt.Sprintf("argument %q: number out of range", joinPath(path)))
	}
	return v, nil
}

// maxExponent bounds the decimal exponent of numbers in arguments: exact
// arithmetic on 1e-9999999 would cost seconds of CPU in validation.
const maxExponent = 400

// saneNumber reports whether the number literal s is short enough and has
// a small enough exponent to be handled exactly.
func saneNumber(s string) bool {
	if len(s) > 2*maxExponent {
		return false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > maxExponent || exp < -maxExponent {
			return false
		}
	}
	return true
}

// numbersInRange reports whether every number in v has a small exponent,
// and if not, where the first offending one is.
func numbersInRange(v any, path []string) ([]string, bool) {
	switch val := v.(type) {
	case json.Number:
		if !saneNumber(val.String()) {
			return path, false
		}
	case []any:
		for i, x := range val {
			if p, ok := numbersInRange(x, append(path, strconv.Itoa(i))); !ok {
				return p, false
			}
		}
	case map[string]any:
		for k, x := range val {
			if p, ok := numbersInRange(x, append(path, k)); !ok {
				return p, false
			}
		}
	}
	return nil, true
}

func decodeJSON(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// Decode copies parsed arguments into v, a pointer to a struct with json
// tags.
func Decode(args map[string]any, v any) error {
	data, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArguments, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArguments, err)
	}
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64, int64, int:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
