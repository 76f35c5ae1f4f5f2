package markup

import (
	"bytes"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
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
	escape: EscapeHTML,
	bold:   [2]string{"<b>", "</b>"},
	italic: [2]string{"<i>", "</i>"},
	strike: [2]string{"<s>", "</s>"},
	code:   [2]string{"<code>", "</code>"},
	pre: func(lang string) [2]string {
		if lang == "" {
			return [2]string{"<pre>", "</pre>"}
		}
		return [2]string{`<pre><code class="language-` + EscapeHTML(lang) + `">`, "</code></pre>"}
	},
	link: func(url, label string) string {
		if !absoluteSafe(url) {
			return textLink(url, label, EscapeHTML)
		}
		return `<a href="` + EscapeHTML(url) + `">` + label + "</a>"
	},
	quote: [2]string{"<blockquote>", "</blockquote>"},
}

var slack = dialect{
	escape: EscapeSlack,
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
			return textLink(url, label, EscapeSlack)
		}
		url = strings.ReplaceAll(url, "&", "&amp;")
		// A line break ends the link in Slack: a label spanning lines
		// (a soft break in the Markdown) is joined with spaces.
		label = strings.ReplaceAll(label, "\n", " ")
		if label == "" || label == EscapeSlack(url) {
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
		return "<p>" + EscapeHTML(md) + "</p>"
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

// EscapeHTML escapes text for the HTML of Telegram and the web: &, <, >
// and the double quote.
func EscapeHTML(s string) string {
	return htmlEscaper.Replace(s)
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// EscapeSlack escapes the three characters Slack treats as control
// characters in mrkdwn.
func EscapeSlack(s string) string { return slackEscaper.Replace(s) }

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
