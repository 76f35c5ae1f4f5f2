package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"unsafe"

	openai "github.com/sashabaranov/go-openai"

	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Tool schemas are most of a request (about 12 KB of the fleet's default
// tools), and go-openai encodes every schema and compacts it twice on each
// call (Tool.MarshalJSON, then the request's encoder): with the checks
// before it, that was the largest part of the all-in-one's CPU per turn.
// So a provider encodes each definition once, keeps it by its content, and
// the doer writes the encoded array into the request body that go-openai
// built without it.

// toolSet is a request's tools: converted for go-openai's validation, and
// encoded as the request's "tools" array.
type toolSet struct {
	list    []openai.Tool
	encoded []byte
}

// toolKey is a definition's content: what its encoding depends on.
type toolKey struct{ name, description, parameters string }

type encodedTool struct {
	tool    openai.Tool
	encoded []byte
}

// toolCacheMax bounds the cache; it is emptied when full (a fleet's
// catalog has tens of tools, so only changing definitions fill it).
const toolCacheMax = 512

// toolCache keeps the encoding of every definition a provider has sent,
// and the last call's whole set.
type toolCache struct {
	mu sync.Mutex
	m  map[toolKey]encodedTool
	// last is reused while calls pass the same definitions with the same
	// field values (the worker's catalog hands out one slice until it
	// changes): keying each definition on its content hashes and compares
	// every schema, about 12 KB, and the set was built anew on every call.
	last *lastSet
}

// lastSet is a call's definitions, in the caller's order, with the field
// values they were encoded from, and the set made of them.
type lastSet struct {
	defs []*nanofleetv1.ToolDefinition
	keys []toolKey
	set  toolSet
}

// matches reports whether defs are the definitions of ls with the very
// same field values. Strings are immutable, so a field holding the same
// bytes at the same address still says what was encoded; a field set
// since holds another string (or an equal one elsewhere, which only
// misses the shortcut).
func (ls *lastSet) matches(defs []*nanofleetv1.ToolDefinition) bool {
	if len(defs) != len(ls.defs) {
		return false
	}
	for i, d := range defs {
		k := ls.keys[i]
		if d != ls.defs[i] || !sameString(d.GetName(), k.name) ||
			!sameString(d.GetDescription(), k.description) || !sameString(d.GetParametersJson(), k.parameters) {
			return false
		}
	}
	return true
}

// sameString reports whether a and b are the same string in memory, which
// needs no look at their bytes.
func sameString(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b))
}

// convert maps definitions in toolschema's order (built-ins by name, then
// MCP tools by name), so the prompt prefix is stable and provider-side
// prompt caching works, to go-openai's tools and their encoded array.
// The returned set is shared: callers only read it.
func (c *toolCache) convert(defs []*nanofleetv1.ToolDefinition) (toolSet, error) {
	if len(defs) == 0 {
		return toolSet{}, nil
	}
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if last != nil && last.matches(defs) {
		return last.set, nil
	}
	keys := make([]toolKey, len(defs))
	for i, d := range defs {
		keys[i] = toolKey{d.GetName(), d.GetDescription(), d.GetParametersJson()}
	}
	// toolschema.SortDefinitions's order, of the values read once.
	sorted := slices.Clone(keys)
	slices.SortStableFunc(sorted, func(a, b toolKey) int { return toolschema.Compare(a.name, b.name) })
	set := toolSet{list: make([]openai.Tool, 0, len(sorted))}
	encoded := make([][]byte, 0, len(sorted))
	size := 1
	for _, k := range sorted {
		e, err := c.encode(k)
		if err != nil {
			return toolSet{}, err
		}
		set.list = append(set.list, e.tool)
		encoded = append(encoded, e.encoded)
		size += len(e.encoded) + 1
	}
	set.encoded = make([]byte, 0, size)
	set.encoded = append(set.encoded, '[')
	for i, e := range encoded {
		if i > 0 {
			set.encoded = append(set.encoded, ',')
		}
		set.encoded = append(set.encoded, e...)
	}
	set.encoded = append(set.encoded, ']')
	c.mu.Lock()
	c.last = &lastSet{defs: slices.Clone(defs), keys: keys, set: set}
	c.mu.Unlock()
	return set, nil
}

// encode returns the definition k converted and encoded, from the cache
// when it can.
func (c *toolCache) encode(k toolKey) (encodedTool, error) {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return e, nil
	}
	if k.name == "" {
		return encodedTool{}, fmt.Errorf("%w: tool without a name", ErrInvalidRequest)
	}
	params := json.RawMessage(k.parameters)
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	} else if !json.Valid(params) {
		return encodedTool{}, fmt.Errorf("%w: tool %q: parameters are not valid JSON", ErrInvalidRequest, k.name)
	}
	e.tool = openai.Tool{
		Type:     openai.ToolTypeFunction,
		Function: &openai.FunctionDefinition{Name: k.name, Description: k.description, Parameters: params},
	}
	// The bytes go-openai writes for this tool: json.Marshal compacts
	// Tool.MarshalJSON's output as the request's encoder does.
	enc, err := json.Marshal(e.tool)
	if err != nil {
		return encodedTool{}, fmt.Errorf("%w: tool %q: %w", ErrInvalidRequest, k.name, err)
	}
	e.encoded = enc
	c.mu.Lock()
	if c.m == nil || len(c.m) >= toolCacheMax {
		c.m = make(map[toolKey]encodedTool)
	}
	c.m[k] = e
	c.mu.Unlock()
	return e, nil
}

// errBodyNotObject means go-openai built a body the tools cannot be
// added to; it would be a change in go-openai.
var errBodyNotObject = errors.New("llm: request body is not a JSON object")

// addTools writes the encoded tools array into req's JSON body as its
// "tools" member.
func addTools(req *http.Request, tools []byte) error {
	if req.Body == nil {
		return errBodyNotObject
	}
	// One buffer for the body and the tools: go-openai said its length
	// (ReadFrom wants MinRead free to see the end).
	buf := bytes.NewBuffer(make([]byte, 0, max(req.ContentLength, 0)+int64(len(tools))+bytes.MinRead))
	_, err := buf.ReadFrom(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return fmt.Errorf("llm: read request body: %w", err)
	}
	body := bytes.TrimRight(buf.Bytes(), " \n\r\t")
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return errBodyNotObject
	}
	out := bytes.TrimRight(body[:len(body)-1], " \n\r\t")
	if out[len(out)-1] != '{' {
		out = append(out, ',')
	}
	out = append(out, `"tools":`...)
	out = append(out, tools...)
	out = append(out, '}')
	req.Body = io.NopCloser(bytes.NewReader(out))
	req.ContentLength = int64(len(out))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out)), nil }
	return nil
}
