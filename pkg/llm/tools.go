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

// toolCache keeps the encoding of every definition a provider has sent.
type toolCache struct {
	mu sync.Mutex
	m  map[toolKey]encodedTool
}

// convert maps definitions in toolschema's order (built-ins by name, then
// MCP tools by name), so the prompt prefix is stable and provider-side
// prompt caching works, to go-openai's tools and their encoded array.
func (c *toolCache) convert(defs []*nanofleetv1.ToolDefinition) (toolSet, error) {
	if len(defs) == 0 {
		return toolSet{}, nil
	}
	sorted := slices.Clone(defs)
	toolschema.SortDefinitions(sorted)
	set := toolSet{list: make([]openai.Tool, 0, len(sorted))}
	parts := make([][]byte, 0, len(sorted))
	size := 2
	for _, d := range sorted {
		e, err := c.encode(d)
		if err != nil {
			return toolSet{}, err
		}
		set.list = append(set.list, e.tool)
		parts = append(parts, e.encoded)
		size += len(e.encoded) + 1
	}
	set.encoded = make([]byte, 0, size)
	set.encoded = append(set.encoded, '[')
	set.encoded = append(set.encoded, bytes.Join(parts, []byte{','})...)
	set.encoded = append(set.encoded, ']')
	return set, nil
}

// encode returns d converted and encoded, from the cache when it can.
func (c *toolCache) encode(d *nanofleetv1.ToolDefinition) (encodedTool, error) {
	k := toolKey{d.GetName(), d.GetDescription(), d.GetParametersJson()}
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
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return fmt.Errorf("llm: read request body: %w", err)
	}
	body = bytes.TrimRight(body, " \n\r\t")
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return errBodyNotObject
	}
	head := bytes.TrimRight(body[:len(body)-1], " \n\r\t")
	out := make([]byte, 0, len(body)+len(tools)+10)
	out = append(out, head...)
	if head[len(head)-1] != '{' {
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
