package markup

import (
	"strconv"
	"strings"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/util"
)

// writer walks a parsed document and writes it in one dialect.
type writer struct {
	d     dialect
	src   []byte
	buf   strings.Builder
	depth int // list nesting
}

// sep ends the current block with a blank line, unless output is empty.
func (w *writer) sep() {
	s := w.buf.String()
	if s == "" || strings.HasSuffix(s, "\n\n") {
		return
	}
	if strings.HasSuffix(s, "\n") {
		w.buf.WriteString("\n")
		return
	}
	w.buf.WriteString("\n\n")
}

func (w *writer) block(n ast.Node) {
	switch n := n.(type) {
	case *ast.Document:
		w.children(n)
	case *ast.Paragraph:
		w.sep()
		w.inlines(n)
	case *ast.TextBlock:
		w.inlines(n)
	case *ast.Heading:
		w.sep()
		w.buf.WriteString(w.d.bold[0])
		w.inlines(n)
		w.buf.WriteString(w.d.bold[1])
	case *ast.ThematicBreak:
		w.sep()
		w.buf.WriteString("──────────")
	case *ast.FencedCodeBlock:
		w.sep()
		w.code(n, string(n.Language(w.src)))
	case *ast.CodeBlock:
		w.sep()
		w.code(n, "")
	case *ast.HTMLBlock:
		w.sep()
		var b strings.Builder
		lines := n.Lines()
		for i := 0; i < lines.Len(); i++ {
			seg := lines.At(i)
			b.Write(seg.Value(w.src))
		}
		if n.HasClosure() {
			b.Write(n.ClosureLine.Value(w.src))
		}
		w.buf.WriteString(w.d.escape(strings.TrimRight(b.String(), "\n")))
	case *ast.Blockquote:
		w.sep()
		w.quote(n)
	case *ast.List:
		w.list(n)
	case *east.Table:
		w.sep()
		w.table(n)
	default:
		w.children(n)
	}
}

func (w *writer) children(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		w.block(c)
	}
}

func (w *writer) code(n ast.Node, lang string) {
	var b strings.Builder
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		b.Write(seg.Value(w.src))
	}
	body := strings.TrimRight(b.String(), "\n")
	p := w.d.pre(lang)
	w.buf.WriteString(p[0])
	w.buf.WriteString(w.d.escape(body))
	if w.d.preBreak {
		w.buf.WriteString("\n")
	}
	w.buf.WriteString(p[1])
}

func (w *writer) quote(n *ast.Blockquote) {
	inner := &writer{d: w.d, src: w.src}
	inner.children(n)
	body := strings.TrimRight(inner.buf.String(), "\n")
	if !w.d.quoteLines {
		w.buf.WriteString(w.d.quote[0] + body + w.d.quote[1])
		return
	}
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		if i > 0 {
			w.buf.WriteString("\n")
		}
		w.buf.WriteString("> " + l)
	}
}

func (w *writer) list(n *ast.List) {
	if w.depth == 0 {
		w.sep()
	} else if !strings.HasSuffix(w.buf.String(), "\n") {
		w.buf.WriteString("\n")
	}
	w.depth++
	defer func() { w.depth-- }()
	num := n.Start
	if num == 0 {
		num = 1
	}
	first := true
	for item := n.FirstChild(); item != nil; item = item.NextSibling() {
		if !first && !strings.HasSuffix(w.buf.String(), "\n") {
			w.buf.WriteString("\n")
		}
		first = false
		w.buf.WriteString(strings.Repeat("  ", w.depth-1))
		if n.IsOrdered() {
			w.buf.WriteString(strconv.Itoa(num) + ". ")
			num++
		} else {
			w.buf.WriteString("• ")
		}
		for c := item.FirstChild(); c != nil; c = c.NextSibling() {
			switch c.(type) {
			case *ast.Paragraph, *ast.TextBlock:
				if c != item.FirstChild() {
					w.buf.WriteString("\n" + strings.Repeat("  ", w.depth))
				}
				w.inlines(c)
			default:
				w.block(c)
			}
		}
	}
	if w.depth == 1 {
		w.buf.WriteString("\n")
	}
}

// table renders a GFM table as aligned preformatted text: neither platform
// has tables.
func (w *writer) table(n *east.Table) {
	var rows [][]string
	for r := n.FirstChild(); r != nil; r = r.NextSibling() {
		var row []string
		for c := r.FirstChild(); c != nil; c = c.NextSibling() {
			row = append(row, strings.TrimSpace(plainText(c, w.src)))
		}
		rows = append(rows, row)
	}
	widths := map[int]int{}
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	var b strings.Builder
	for ri, row := range rows {
		for i, cell := range row {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(cell + strings.Repeat(" ", widths[i]-len([]rune(cell))))
		}
		b.WriteString("\n")
		if ri == 0 {
			for i := range row {
				if i > 0 {
					b.WriteString("-+-")
				}
				b.WriteString(strings.Repeat("-", widths[i]))
			}
			b.WriteString("\n")
		}
	}
	p := w.d.pre("")
	w.buf.WriteString(p[0] + w.d.escape(strings.TrimRight(b.String(), "\n")))
	if w.d.preBreak {
		w.buf.WriteString("\n")
	}
	w.buf.WriteString(p[1])
}

func (w *writer) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		w.inline(c)
	}
}

func (w *writer) inline(n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		w.buf.WriteString(w.d.escape(textValue(n.Segment.Value(w.src), n.IsRaw())))
		switch {
		case n.HardLineBreak(), n.SoftLineBreak():
			w.buf.WriteString("\n")
		}
	case *ast.String:
		w.buf.WriteString(w.d.escape(textValue(n.Value, n.IsRaw())))
	case *ast.Emphasis:
		m := w.d.italic
		if n.Level >= 2 {
			m = w.d.bold
		}
		w.buf.WriteString(m[0])
		w.inlines(n)
		w.buf.WriteString(m[1])
	case *east.Strikethrough:
		w.buf.WriteString(w.d.strike[0])
		w.inlines(n)
		w.buf.WriteString(w.d.strike[1])
	case *ast.CodeSpan:
		var b strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				b.Write(t.Segment.Value(w.src))
			}
		}
		w.buf.WriteString(w.d.code[0] + w.d.escape(b.String()) + w.d.code[1])
	case *ast.Link:
		inner := &writer{d: w.d, src: w.src}
		inner.inlines(n)
		w.buf.WriteString(w.d.link(string(n.Destination), inner.buf.String()))
	case *ast.AutoLink:
		url := string(n.URL(w.src))
		w.buf.WriteString(w.d.link(url, w.d.escape(string(n.Label(w.src)))))
	case *ast.Image:
		label := plainText(n, w.src)
		if label == "" {
			label = string(n.Destination)
		}
		w.buf.WriteString(w.d.link(string(n.Destination), w.d.escape(label)))
	case *ast.RawHTML:
		segs := n.Segments
		for i := 0; i < segs.Len(); i++ {
			seg := segs.At(i)
			w.buf.WriteString(w.d.escape(string(seg.Value(w.src))))
		}
	case *east.TaskCheckBox:
		if n.IsChecked {
			w.buf.WriteString("☑ ")
		} else {
			w.buf.WriteString("☐ ")
		}
	default:
		w.inlines(n)
	}
}

// textValue resolves backslash escapes and entities the way an HTML
// renderer would, so "\*" shows as "*" and "&amp;" as "&".
func textValue(v []byte, raw bool) string {
	if raw {
		return string(v)
	}
	v = util.UnescapePunctuations(v)
	v = util.ResolveNumericReferences(v)
	v = util.ResolveEntityNames(v)
	return string(v)
}

// plainText is the text of n's inline content without markup.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.WriteString(textValue(c.Segment.Value(src), c.IsRaw()))
		case *ast.String:
			b.WriteString(string(c.Value))
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}
