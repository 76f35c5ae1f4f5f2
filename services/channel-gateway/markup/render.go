package markup

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	gparser "github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// dialect is what differs between the chat platforms' markup.
type dialect struct {
	escape               func(string) string
	bold, italic, strike [2]string
	code                 [2]string
	pre                  func(lang string) [2]string
	link                 func(url, label string) string
	quote                [2]string
	// quoteLines prefixes every line of a quote instead of wrapping it.
	quoteLines bool
	// preBreak puts the closing fence of a code block on its own line.
	preBreak bool
}

var telegram = dialect{
	escape: escapeHTML,
	bold:   [2]string{"<b>", "</b>"},
	italic: [2]string{"<i>", "</i>"},
	strike: [2]string{"<s>", "</s>"},
	code:   [2]string{"<code>", "</code>"},
	pre: func(lang string) [2]string {
		if lang == "" {
			return [2]string{"<pre>", "</pre>"}
		}
		return [2]string{`<pre><code class="language-` + escapeHTML(lang) + `">`, "</code></pre>"}
	},
	link: func(url, label string) string {
		if !absoluteSafe(url) {
			return textLink(url, label, escapeHTML)
		}
		return `<a href="` + escapeHTML(url) + `">` + label + "</a>"
	},
	quote: [2]string{"<blockquote>", "</blockquote>"},
}

var slack = dialect{
	escape: escapeSlack,
	bold:   [2]string{"*", "*"},
	italic: [2]string{"_", "_"},
	strike: [2]string{"~", "~"},
	code:   [2]string{"`", "`"},
	pre:    func(string) [2]string { return [2]string{"```\n", "```"} },
	link: func(url, label string) string {
		// Slack's <url|label> has no escape for '|' or '>' in the URL, and
		// a URL with spaces is not a link: such a link is shown as text. So
		// is one without a safe scheme, which would also let "<!channel>"
		// or "<@U123>" through as a mention.
		if !absoluteSafe(url) || strings.ContainsAny(url, "<>| \t\n") {
			return textLink(url, label, escapeSlack)
		}
		url = strings.ReplaceAll(url, "&", "&amp;")
		// A line break ends the link in Slack: a label spanning lines
		// (a soft break in the Markdown) is joined with spaces.
		label = strings.ReplaceAll(label, "\n", " ")
		if label == "" || label == escapeSlack(url) {
			return "<" + url + ">"
		}
		return "<" + url + "|" + label + ">"
	},
	quoteLines: true,
	preBreak:   true,
}

// whatsapp has no escapes: a literal * or _ that would pair up is left
// as it is, which is how WhatsApp users type them too.
var whatsapp = dialect{
	escape: func(s string) string { return s },
	bold:   [2]string{"*", "*"},
	italic: [2]string{"_", "_"},
	strike: [2]string{"~", "~"},
	code:   [2]string{"`", "`"},
	pre:    func(string) [2]string { return [2]string{"```\n", "```"} },
	link: func(url, label string) string {
		return textLink(url, label, func(s string) string { return s })
	},
	quoteLines: true,
	preBreak:   true,
}

// textLink shows a link that may not be rendered as one: its label and,
// in brackets, its URL as text.
func textLink(url, label string, escape func(string) string) string {
	switch {
	case label == "" || label == escape(url):
		return escape(url)
	case url == "":
		return label
	}
	return label + " (" + escape(url) + ")"
}

// TelegramHTML renders Markdown as the HTML subset Telegram's Bot API
// accepts with parse_mode "HTML".
func TelegramHTML(md string) string { return render(md, telegram) }

// SlackMrkdwn renders Markdown as Slack mrkdwn.
func SlackMrkdwn(md string) string { return render(md, slack) }

// WhatsApp renders Markdown as WhatsApp formats text: *bold*, _italic_,
// ~strike~, `code`, ```monospace``` blocks, "> " quotes, and links as
// "label (url)" since WhatsApp links bare URLs itself.
func WhatsApp(md string) string { return render(md, whatsapp) }

// HTML renders Markdown as HTML for the web chat. Raw HTML in the source is
// escaped, so the result is safe to insert into a page.
func HTML(md string) string {
	var buf bytes.Buffer
	if err := webMarkdown.Convert([]byte(md), &buf); err != nil {
		return "<p>" + escapeHTML(md) + "</p>"
	}
	return buf.String()
}

var webMarkdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(gparser.WithASTTransformers(util.Prioritized(unsafeLinks{}, 1000))),
	goldmark.WithRendererOptions(html.WithHardWraps()),
)

// unsafeLinks turns every link and image whose URL is neither relative nor
// of a safe scheme into its text. goldmark itself only empties a few
// schemes it knows to be dangerous (javascript:, data:…) and lets any
// other through.
type unsafeLinks struct{}

func (unsafeLinks) Transform(doc *ast.Document, reader text.Reader, _ gparser.Context) {
	src := reader.Source()
	var unsafe []ast.Node
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			if !relativeOrSafe(string(n.Destination)) {
				unsafe = append(unsafe, n)
			}
		case *ast.Image:
			if !relativeOrSafe(string(n.Destination)) {
				unsafe = append(unsafe, n)
			}
		case *ast.AutoLink:
			if !relativeOrSafe(string(n.URL(src))) {
				unsafe = append(unsafe, n)
			}
		}
		return ast.WalkContinue, nil
	})
	for _, n := range unsafe {
		parent := n.Parent()
		if a, ok := n.(*ast.AutoLink); ok {
			parent.ReplaceChild(parent, n, ast.NewString(a.Label(src)))
			continue
		}
		for c := n.FirstChild(); c != nil; {
			next := c.NextSibling()
			parent.InsertBefore(parent, n, c)
			c = next
		}
		parent.RemoveChild(parent, n)
	}
}

var parser = goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser()

func render(md string, d dialect) string {
	src := []byte(md)
	doc := parser.Parse(text.NewReader(src))
	w := &writer{d: d, src: src}
	w.block(doc)
	return strings.TrimRight(w.buf.String(), "\n ")
}

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

func escapeHTML(s string) string {
	return htmlEscaper.Replace(s)
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// escapeSlack escapes the three characters Slack treats as control
// characters in mrkdwn.
func escapeSlack(s string) string { return slackEscaper.Replace(s) }

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Plain returns md with its markup removed, for platforms or fallbacks
// that show text as is.
func Plain(md string) string {
	src := []byte(md)
	doc := parser.Parse(text.NewReader(src))
	w := &writer{d: plain, src: src}
	w.block(doc)
	return strings.TrimRight(w.buf.String(), "\n ")
}

var plain = dialect{
	escape: func(s string) string { return s },
	pre:    func(string) [2]string { return [2]string{"", ""} },
	link: func(url, label string) string {
		if label == "" || label == url {
			return url
		}
		return label + " (" + url + ")"
	},
	quoteLines: true,
}
