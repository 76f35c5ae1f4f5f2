package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nuid"
	"github.com/yosida95/uritemplate/v3"

	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// item is one tool, resource, resource template or prompt of a server,
// served as a tool named name.
type item struct {
	kind kind
	raw  string // the server's name of it
	base string // tool name before clash handling
	name string // tool name
	def  toolschema.Tool

	uri      string                // resource
	template *uritemplate.Template // resource template
	readOnly bool
}

func (it *item) identity() string { return it.kind.String() + "\x00" + it.raw }

// emptyObject is the schema of a tool without arguments.
var emptyObject = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)

// toolItem wraps an MCP tool. Its schema is the server's input schema; a
// tool whose schema does not compile is skipped (error).
func toolItem(t *mcpsdk.Tool) (*item, error) {
	schema := emptyObject
	if t.InputSchema != nil {
		data, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
		if string(data) != "null" && string(data) != "{}" {
			schema = data
		}
	}
	if _, err := toolschema.Compile(schema); err != nil {
		return nil, err
	}
	desc := firstNonBlank(t.Description, t.Title, t.Name)
	readOnly := t.Annotations != nil && t.Annotations.ReadOnlyHint
	return &item{kind: kindTool, raw: t.Name, readOnly: readOnly,
		def: toolschema.Tool{Description: desc, Parameters: schema, ReadOnly: readOnly}}, nil
}

// resourceItem wraps a resource as a tool without arguments.
func resourceItem(r *mcpsdk.Resource) *item {
	desc := firstNonBlank(r.Description, r.Title, r.Name)
	if r.MIMEType != "" {
		desc += " (" + r.MIMEType + ")"
	}
	return &item{kind: kindResource, raw: r.Name, uri: r.URI, readOnly: true,
		def: toolschema.Tool{Description: "Read the MCP resource " + r.URI + ": " + desc, Parameters: emptyObject, ReadOnly: true}}
}

// templateItem wraps a resource template as a tool whose arguments are
// the template's variables, all strings and required.
func templateItem(r *mcpsdk.ResourceTemplate) (*item, error) {
	tmpl, err := uritemplate.New(r.URITemplate)
	if err != nil {
		return nil, fmt.Errorf("uri template %q: %w", r.URITemplate, err)
	}
	props := map[string]any{}
	var required []string
	for _, v := range tmpl.Varnames() {
		props[v] = map[string]any{"type": "string", "description": "Value of {" + v + "} in " + r.URITemplate}
		required = append(required, v)
	}
	desc := firstNonBlank(r.Description, r.Title, r.Name)
	if r.MIMEType != "" {
		desc += " (" + r.MIMEType + ")"
	}
	return &item{kind: kindTemplate, raw: r.Name, uri: r.URITemplate, template: tmpl, readOnly: true,
		def: toolschema.Tool{Description: "Read an MCP resource " + r.URITemplate + ": " + desc,
			Parameters: toolschema.Object(props, required...), ReadOnly: true}}, nil
}

// promptItem wraps a prompt as a tool whose arguments are the prompt's,
// all strings.
func promptItem(p *mcpsdk.Prompt) *item {
	props := map[string]any{}
	var required []string
	for _, a := range p.Arguments {
		if a == nil || a.Name == "" {
			continue
		}
		prop := map[string]any{"type": "string"}
		if d := firstNonBlank(a.Description, a.Title); d != "" {
			prop["description"] = d
		}
		props[a.Name] = prop
		if a.Required {
			required = append(required, a.Name)
		}
	}
	desc := firstNonBlank(p.Description, p.Title, p.Name)
	return &item{kind: kindPrompt, raw: p.Name, readOnly: true,
		def: toolschema.Tool{Description: "Get the MCP prompt " + p.Name + " (a filled-in prompt template to follow): " + desc,
			Parameters: toolschema.Object(props, required...), ReadOnly: true}}
}

// firstNonBlank is the first of ss with more than white space, trimmed:
// servers send descriptions of a single space or newline, which cmp.Or
// would keep.
func firstNonBlank(ss ...string) string {
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}

// itemTool serves an item of a server as a runner tool.
type itemTool struct {
	s  *server
	it *item
}

// Definition implements tools.Tool.
func (t itemTool) Definition() toolschema.Tool { return t.it.def }

// Run implements tools.Tool.
func (t itemTool) Run(ctx context.Context, call *tools.Call) (tools.Result, error) {
	return t.s.call(ctx, t.it, call)
}

// do performs one request of an item on a session.
func do(ctx context.Context, sess *mcpsdk.ClientSession, it *item, call *tools.Call) (tools.Result, error) {
	r := renderer{ctx: ctx, call: call}
	switch it.kind {
	case kindTool:
		res, err := sess.CallTool(ctx, &mcpsdk.CallToolParams{Name: it.raw, Arguments: orEmpty(call.Args)})
		if err != nil {
			return tools.Result{}, err
		}
		return r.toolResult(res)
	case kindResource, kindTemplate:
		uri := it.uri
		if it.kind == kindTemplate {
			values := uritemplate.Values{}
			for k, v := range call.Args {
				values.Set(k, uritemplate.String(fmt.Sprint(v)))
			}
			var err error
			if uri, err = it.template.Expand(values); err != nil {
				return tools.Result{}, fmt.Errorf("%w: expand %s: %w", toolschema.ErrInvalidArguments, it.uri, err)
			}
		}
		res, err := sess.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: uri})
		if err != nil {
			return tools.Result{}, err
		}
		return r.resourceResult(res)
	case kindPrompt:
		args := map[string]string{}
		for k, v := range call.Args {
			args[k] = fmt.Sprint(v)
		}
		res, err := sess.GetPrompt(ctx, &mcpsdk.GetPromptParams{Name: it.raw, Arguments: args})
		if err != nil {
			return tools.Result{}, err
		}
		return r.promptResult(res)
	}
	return tools.Result{}, fmt.Errorf("unknown item kind %d", it.kind)
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// renderer turns MCP content into text for the model; images, audio and
// binary resources go to the object store and are attached as media.
type renderer struct {
	ctx   context.Context
	call  *tools.Call
	parts []string
	media []*nanofleetv1.MediaRef
}

func (r *renderer) result() tools.Result {
	text := strings.Join(r.parts, "\n")
	if strings.TrimSpace(text) == "" && len(r.media) == 0 {
		text = "(no output)"
	}
	return tools.Result{Text: text, Media: r.media}
}

func (r *renderer) toolResult(res *mcpsdk.CallToolResult) (tools.Result, error) {
	if res == nil {
		return tools.Result{}, fmt.Errorf("%w: empty tool result", ErrMalformed)
	}
	for _, c := range res.Content {
		r.content(c)
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		data, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return tools.Result{}, fmt.Errorf("%w: structured content: %w", ErrMalformed, err)
		}
		r.parts = append(r.parts, string(data))
	}
	out := r.result()
	if res.IsError {
		return tools.Result{}, &ToolError{Text: out.Text}
	}
	return out, nil
}

func (r *renderer) resourceResult(res *mcpsdk.ReadResourceResult) (tools.Result, error) {
	if res == nil {
		return tools.Result{}, fmt.Errorf("%w: empty resource result", ErrMalformed)
	}
	for _, c := range res.Contents {
		r.resource(c)
	}
	return r.result(), nil
}

func (r *renderer) promptResult(res *mcpsdk.GetPromptResult) (tools.Result, error) {
	if res == nil {
		return tools.Result{}, fmt.Errorf("%w: empty prompt result", ErrMalformed)
	}
	if res.Description != "" {
		r.parts = append(r.parts, res.Description, "")
	}
	for _, m := range res.Messages {
		if m == nil {
			continue
		}
		r.parts = append(r.parts, "["+string(m.Role)+"]")
		r.content(m.Content)
		r.parts = append(r.parts, "")
	}
	return r.result(), nil
}

func (r *renderer) content(c mcpsdk.Content) {
	switch c := c.(type) {
	case *mcpsdk.TextContent:
		r.parts = append(r.parts, c.Text)
	case *mcpsdk.ImageContent:
		r.attach("image", c.MIMEType, "", c.Data)
	case *mcpsdk.AudioContent:
		r.attach("audio", c.MIMEType, "", c.Data)
	case *mcpsdk.ResourceLink:
		line := "[resource link: " + c.URI
		if n := firstNonBlank(c.Title, c.Name); n != "" {
			line += " (" + n + ")"
		}
		if c.Description != "" {
			line += ": " + c.Description
		}
		r.parts = append(r.parts, line+"]")
	case *mcpsdk.EmbeddedResource:
		r.resource(c.Resource)
	case nil:
	default:
		data, _ := json.Marshal(c)
		r.parts = append(r.parts, string(data))
	}
}

func (r *renderer) resource(c *mcpsdk.ResourceContents) {
	switch {
	case c == nil:
	case c.Blob != nil:
		r.attach("resource", c.MIMEType, c.URI, c.Blob)
	default:
		r.parts = append(r.parts, c.Text)
	}
}

// attach stores binary content and mentions it in the text.
func (r *renderer) attach(what, mimeType, uri string, data []byte) {
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	label := what
	if uri != "" {
		label += " " + uri
	}
	if r.call == nil || r.call.Blobs == nil {
		r.parts = append(r.parts, fmt.Sprintf("[%s: %s, %d bytes, not stored]", label, mimeType, len(data)))
		return
	}
	name := what + extension(mimeType)
	obj := tools.SessionObjectPrefix(tools.MediaPrefix, r.call.SessionKey) + nuid.Next() + "/" + name
	if _, err := r.call.Blobs.PutBytes(r.ctx, obj, data); err != nil {
		r.parts = append(r.parts, fmt.Sprintf("[%s: %s, %d bytes, could not be stored: %v]", label, mimeType, len(data), err))
		return
	}
	r.media = append(r.media, &nanofleetv1.MediaRef{Object: obj, MimeType: mimeType, Name: name, Size: int64(len(data))})
	r.parts = append(r.parts, fmt.Sprintf("[%s: %s, %d bytes, attached]", label, mimeType, len(data)))
}

func extension(mimeType string) string {
	if exts, err := mime.ExtensionsByType(mimeType); err == nil && len(exts) > 0 {
		return exts[0]
	}
	return ".bin"
}
