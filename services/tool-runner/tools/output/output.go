// Package output keeps tool results small: a result longer than a limit
// is stored whole in the fleet's object store and replaced by a preview
// and a reference (see [Store]), and read_tool_output reads the stored
// text back a page at a time. A session can read back only its own
// results: references are scoped by session.
package output

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/nanofleet/nanofleet/pkg/textcut"
	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// Limits of stored output.
const (
	// DefaultLimit is read_tool_output's default page, in characters.
	DefaultLimit = 10_000
	// MaxLimit is its largest page; it stays below the oversize
	// threshold so a page is never stored again.
	MaxLimit = 15_000
)

// Store saves text under a new reference in the session's space and
// returns the reference.
func Store(ctx context.Context, blobs tools.Blobs, sessionKey, text string) (string, error) {
	ref := tools.SessionObjectPrefix(tools.OutputPrefix, sessionKey) + nuid.Next()
	if _, err := blobs.PutBytes(ctx, ref, []byte(text)); err != nil {
		return "", fmt.Errorf("store oversize output: %w", err)
	}
	return ref, nil
}

// Preview is what the model sees instead of a stored text: its first
// previewChars characters and how to read the rest.
func Preview(text, ref string, previewChars int) string {
	total := utf8.RuneCountInString(text)
	head := textcut.RunePrefix(text, previewChars)
	return fmt.Sprintf("%s\n\n[Output truncated: %d characters in all, the first %d shown. The full output is stored as ref=%q; call read_tool_output with that ref and offset=%d to read on.]",
		head, total, min(total, previewChars), ref, min(total, previewChars))
}

// Tool is read_tool_output.
func Tool() tools.Tool {
	return tools.Func{
		Def: toolschema.Tool{
			Name:        "read_tool_output",
			Description: "Read a page of a long tool result that was stored instead of shown in full. Pass the ref from the truncation note and an offset in characters.",
			Parameters: toolschema.Object(map[string]any{
				"ref":    map[string]any{"type": "string", "minLength": 1, "description": "The ref from the truncation note"},
				"offset": map[string]any{"type": "integer", "minimum": 0, "default": 0, "description": "Character offset to start at (default 0)"},
				"limit":  map[string]any{"type": "integer", "minimum": 1, "maximum": MaxLimit, "default": DefaultLimit, "description": fmt.Sprintf("Characters to read (default %d, max %d)", DefaultLimit, MaxLimit)},
			}, "ref"),
			ReadOnly: true,
		},
		Fn: read,
	}
}

func read(ctx context.Context, c *tools.Call) (tools.Result, error) {
	var a struct {
		Ref    string `json:"ref"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := toolschema.Decode(c.Args, &a); err != nil {
		return tools.Result{}, err
	}
	own := tools.SessionObjectPrefix(tools.OutputPrefix, c.SessionKey)
	if !strings.HasPrefix(a.Ref, own) || strings.Contains(a.Ref[len(own):], "/") {
		return tools.Result{}, fmt.Errorf("%w: %q is not an output of this session; %w", ErrUnknownRef, a.Ref, sandbox.ErrDenied)
	}
	if c.Blobs == nil {
		return tools.Result{}, errors.New("no object store")
	}
	data, err := c.Blobs.GetBytes(ctx, a.Ref)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return tools.Result{}, fmt.Errorf("%w: %q was not found (stored outputs may expire)", ErrUnknownRef, a.Ref)
	}
	if err != nil {
		return tools.Result{}, fmt.Errorf("read %s: %w", a.Ref, err)
	}
	runes := []rune(string(data))
	total := len(runes)
	if a.Offset >= total && total > 0 {
		return tools.Result{}, fmt.Errorf("offset %d is past the end of %s (%d characters)", a.Offset, a.Ref, total)
	}
	end := min(total, a.Offset+a.Limit)
	text := string(runes[a.Offset:end])
	note := fmt.Sprintf("[%s: characters %d-%d of %d", a.Ref, a.Offset, end, total)
	if end < total {
		note += fmt.Sprintf("; call again with offset=%d for more]", end)
	} else {
		note += "; end of output]"
	}
	return tools.Result{Text: text + "\n\n" + note}, nil
}
