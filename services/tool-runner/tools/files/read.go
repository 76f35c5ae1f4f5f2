package files

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nuid"

	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

// ReadFile is read_file: numbered lines of a text file, paginated by
// offset and limit, at most [MaxReadChars] characters per call; images
// (PNG, JPEG, GIF, WebP) are stored in the object store and returned as
// media for vision models.
func ReadFile() tools.Tool {
	return tools.Func{
		Def: toolschema.Tool{
			Name:        "read_file",
			Description: "Read a file in the workspace. Text comes back as numbered lines (\"12| text\"); use offset and limit to page through large files. Images (PNG, JPEG, GIF, WebP) are attached for viewing.",
			Parameters: toolschema.Object(map[string]any{
				"path":   map[string]any{"type": "string", "description": "File path, relative to the workspace"},
				"offset": map[string]any{"type": "integer", "minimum": 1, "default": 1, "description": "Line number to start reading from (1-indexed, default 1)"},
				"limit":  map[string]any{"type": "integer", "minimum": 1, "default": DefaultReadLines, "description": "Maximum number of lines to read (default 2000)"},
			}, "path"),
			ReadOnly: true,
		},
		Fn: readFile,
	}
}

func readFile(ctx context.Context, c *tools.Call) (tools.Result, error) {
	var a readArgs
	if err := toolschema.Decode(c.Args, &a); err != nil {
		return tools.Result{}, err
	}
	f, fi, err := c.Workspace.Open(a.Path)
	if err != nil {
		return tools.Result{}, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(512)
	if mime := http.DetectContentType(head); isImage(mime) {
		return readImage(ctx, c, a.Path, mime, fi.Size(), br)
	}
	sniff, _ := br.Peek(8192)
	if looksBinary(sniff) {
		return tools.Result{}, fmt.Errorf("%w: %q looks like a binary file (%s); read_file reads text and images", ErrBinary, a.Path, http.DetectContentType(sniff))
	}
	if fi.Size() == 0 {
		return tools.Result{Text: fmt.Sprintf("(Empty file: %s)", a.Path)}, nil
	}
	return readLines(ctx, br, a)
}

func isImage(mime string) bool {
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// looksBinary: a NUL byte, or mostly control characters / invalid UTF-8.
func looksBinary(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	bad := 0
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == 0:
			return true
		case r == utf8.RuneError && size == 1 && len(b)-i >= utf8.UTFMax:
			bad++
		case r < 0x20 && r != '\n' && r != '\r' && r != '\t' && r != '\f' && r != '\v' && r != 0x1b:
			bad++
		}
		i += size
	}
	return bad*10 > len(b)
}

func readImage(ctx context.Context, c *tools.Call, p, mime string, size int64, r io.Reader) (tools.Result, error) {
	if size > MaxImageBytes {
		return tools.Result{}, fmt.Errorf("image %q is %d bytes, more than the %d bytes read_file attaches", p, size, MaxImageBytes)
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxImageBytes+1))
	if err != nil {
		return tools.Result{}, fmt.Errorf("read %s: %w", p, err)
	}
	if c.Blobs == nil {
		return tools.Result{}, fmt.Errorf("image %q cannot be attached: no object store", p)
	}
	name := tools.SessionObjectPrefix(tools.MediaPrefix, c.SessionKey) + nuid.Next() + "/" + path.Base(strings.ReplaceAll(p, "\\", "/"))
	if _, err := c.Blobs.PutBytes(ctx, name, data); err != nil {
		return tools.Result{}, fmt.Errorf("store image %s: %w", p, err)
	}
	return tools.Result{
		Text:  fmt.Sprintf("Image %s (%s, %d bytes) is attached.", p, mime, len(data)),
		Media: []*nanofleetv1.MediaRef{{Object: name, MimeType: mime, Name: path.Base(p), Size: int64(len(data))}},
	}, nil
}

// readLines numbers lines offset..offset+limit-1, stopping early at
// MaxReadChars, and counts the rest of the file for the trailer.
func readLines(ctx context.Context, r *bufio.Reader, a readArgs) (tools.Result, error) {
	var b strings.Builder
	line, shown, last := 0, 0, 0
	full := false
	for {
		// The whole file is read to count its lines, up to a gigabyte:
		// a call whose deadline passed stops.
		if line%4096 == 0 && ctx.Err() != nil {
			return tools.Result{}, fmt.Errorf("read %s: %w", a.Path, context.Cause(ctx))
		}
		text, more, err := readLine(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return tools.Result{}, fmt.Errorf("read %s: %w", a.Path, err)
		}
		line++
		if line < a.Offset || full || shown >= a.Limit {
			continue
		}
		text = strings.TrimSuffix(text, "\r")
		if more {
			text += fmt.Sprintf(" … [line cut at %d characters]", MaxLineChars)
		}
		entry := fmt.Sprintf("%d| %s\n", line, strings.ToValidUTF8(text, "\uFFFD"))
		if b.Len()+len(entry) > MaxReadChars && shown > 0 {
			full = true
			continue
		}
		b.WriteString(entry)
		shown++
		last = line
	}
	total := line
	if total == 0 {
		return tools.Result{Text: fmt.Sprintf("(Empty file: %s)", a.Path)}, nil
	}
	if a.Offset > total {
		return tools.Result{}, fmt.Errorf("offset %d is beyond the end of %s (%d lines)", a.Offset, a.Path, total)
	}
	if last < total {
		fmt.Fprintf(&b, "\n(Showing lines %d-%d of %d. Use offset=%d to continue.)", a.Offset, last, total, last+1)
	} else {
		fmt.Fprintf(&b, "\n(End of file — %d lines total)", total)
	}
	return tools.Result{Text: b.String()}, nil
}

// readLine returns the next line without its newline, at most
// MaxLineChars bytes of it; cut reports that the rest was skipped. It
// never holds more than MaxLineChars bytes of a long line. err is set
// only when nothing was read (io.EOF at the end).
func readLine(r *bufio.Reader) (text string, cut bool, err error) {
	var b []byte
	n := 0
	for {
		chunk, err := r.ReadSlice('\n')
		n += len(chunk)
		if room := MaxLineChars - len(b); room > 0 {
			b = append(b, chunk[:min(room, len(chunk))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if n == 0 {
			if err == nil {
				err = io.EOF
			}
			return "", false, err
		}
		content := n
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			content--
		}
		return strings.TrimSuffix(string(b), "\n"), content > MaxLineChars, nil
	}
}
