package markup_test

import (
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// markdownSeeds cover every construct the renderers handle, and the
// characters each platform treats as markup.
var markdownSeeds = []string{
	"", "plain", "a < b & c > d \"q\"", "**bold** *it* ~~gone~~ `code <x>`",
	"# Title\n\ntext", "- one\n  - two\n1. three", "> quote\n> more",
	"```go\nfmt.Println(\"<x>\")\n```", "    indented code", "~~~\nfence\n~~~",
	"[site](https://x.org/?a=1&b=2)", "<https://x.org>", "![img](https://x.org/i.png)",
	"[a|b](https://x.org/|y)", "<script>alert(1)</script>", "<b>raw</b> &amp; &#60;",
	"| a | b |\n|---|---|\n| 1 | 22 |", "- [x] done\n- [ ] todo", "***", "\\*not\\*",
	"**[link](u) in bold**", "*a **b** c*", "`a``b`", "line\\\nbreak", "😀 ünïcødé",
	"\x00\xff invalid", "[x](javascript:alert(1))", "<img src=x onerror=alert(1)>",
	"[](jAvAsCript)", "[x](jAvAsCript:alert(1))", "[x]( \tjava\tscript:1)", "[x](java&#x73;cript:1)",
	"[x](data:text/html,<b>)", "![i](data:image/svg+xml,x)", "<tel:123>", "<vbscript:x>", "[x](<!channel>)",
	"[x](@U123)", "[x](mailto:a@b.c)", "[x](/rel?a=b:c)", "[x](./a:b)", "[x](HTTPS://X.ORG)", "www.x.org",
}

// linkScheme is the scheme a browser finds in an attribute's URL once the
// HTML entities are decoded (WHATWG URL parsing): leading and trailing
// controls and spaces are dropped, tabs and line breaks removed anywhere.
// It is "" for a relative URL.
func linkScheme(attr string) string {
	u := strings.TrimFunc(html.UnescapeString(attr), func(r rune) bool { return r <= ' ' })
	u = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(u)
	if m := schemePrefix.FindStringSubmatch(u); m != nil {
		return strings.ToLower(m[1])
	}
	return ""
}

var schemePrefix = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.\-]*):`)

// safeSchemes are the schemes a rendered link may have.
var safeSchemes = map[string]bool{"http": true, "https": true, "mailto": true}

// longFence is a code block whose opening fence line alone is longer than
// a small Split limit. It is left out of FuzzSplit's seeds: Split does not
// return on it (cutLine loops when the room left beside the fences is not
// positive), which would hang `make test`; FuzzSplit reports such a hang
// as a failure instead.
var longFence = "```" + strings.Repeat("l", 40) + "\n" + strings.Repeat("x ", 30) + "\n```"

// telegramTag matches one tag of the HTML subset Telegram accepts as the
// renderer writes it.
var telegramTag = regexp.MustCompile(`^<(/?)(b|i|s|code|pre|blockquote|a)( href="[^"<>]*"| class="language-[^"<>]*")?>`)

// checkTelegramHTML reports why s is not well-formed Telegram HTML: a tag
// outside the subset, unbalanced or crossed tags, a raw <, > or &, or a
// tag inside code.
func checkTelegramHTML(s string) string {
	var stack []string
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			m := telegramTag.FindStringSubmatch(s[i:])
			if m == nil {
				return "raw '<' or unknown tag at " + quoteAt(s, i)
			}
			closing, name, attr := m[1] == "/", m[2], m[3]
			switch {
			case closing && attr != "":
				return "closing tag with attributes at " + quoteAt(s, i)
			case closing:
				if len(stack) == 0 || stack[len(stack)-1] != name {
					return "unbalanced </" + name + "> at " + quoteAt(s, i)
				}
				stack = stack[:len(stack)-1]
			default:
				if name == "a" && !strings.HasPrefix(attr, " href=") || name == "code" && strings.HasPrefix(attr, " href=") ||
					name != "a" && name != "code" && attr != "" {
					return "bad attribute at " + quoteAt(s, i)
				}
				// Telegram has no page to resolve a relative link against.
				if href, ok := strings.CutPrefix(attr, " href="); ok && !safeSchemes[linkScheme(href[1:len(href)-1])] {
					return "link without a safe scheme at " + quoteAt(s, i)
				}
				if n := len(stack); n > 0 && (stack[n-1] == "code" || stack[n-1] == "pre" && name != "code") {
					return "tag inside code at " + quoteAt(s, i)
				}
				stack = append(stack, name)
			}
			i += len(m[0])
		case '>':
			return "raw '>' at " + quoteAt(s, i)
		case '&':
			if !hasEntity(s[i:], "&lt;", "&gt;", "&amp;", "&quot;") {
				return "raw '&' at " + quoteAt(s, i)
			}
			i++
		default:
			i++
		}
	}
	if len(stack) > 0 {
		return "unclosed <" + strings.Join(stack, "><") + ">"
	}
	return ""
}

// checkSlackMrkdwn reports why s is not safe mrkdwn: a '<' that does not
// open a link (<url> or <url|label>), a raw '>' or '&' outside one, or a
// link whose label holds a raw control character. (A '|' in a link's URL
// cannot be told from the separator here: Slack cuts the URL at it.)
func checkSlackMrkdwn(s string) string {
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i+1:], '>')
			if end < 0 {
				return "'<' without '>' at " + quoteAt(s, i)
			}
			link := s[i+1 : i+1+end]
			url, label, _ := strings.Cut(link, "|")
			if strings.ContainsAny(url, " ") {
				return "space in link URL at " + quoteAt(s, i)
			}
			if url == "" || strings.ContainsAny(link, "<\n") {
				return "malformed link at " + quoteAt(s, i)
			}
			// Slack reads "<!here>" or "<@U123>" as mentions, not links.
			if !safeSchemes[linkScheme(url)] {
				return "link without a safe scheme at " + quoteAt(s, i)
			}
			if msg := checkSlackText(label); msg != "" {
				return "link label: " + msg
			}
			i += end + 2
		case '>':
			// Quote lines start with "> ", nested ones with "> > ".
			start := strings.LastIndexByte(s[:i], '\n') + 1
			if strings.Trim(s[start:i], "> ") == "" {
				i++
				continue
			}
			return "raw '>' at " + quoteAt(s, i)
		case '&':
			if !hasEntity(s[i:], "&lt;", "&gt;", "&amp;") {
				return "raw '&' at " + quoteAt(s, i)
			}
			i++
		default:
			i++
		}
	}
	return ""
}

func checkSlackText(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<', '>':
			return "raw '" + string(s[i]) + "' at " + quoteAt(s, i)
		case '&':
			if !hasEntity(s[i:], "&lt;", "&gt;", "&amp;") {
				return "raw '&' at " + quoteAt(s, i)
			}
		}
	}
	return ""
}

func hasEntity(s string, entities ...string) bool {
	for _, e := range entities {
		if strings.HasPrefix(s, e) {
			return true
		}
	}
	return false
}

func quoteAt(s string, i int) string {
	end := min(len(s), i+30)
	return strings.ToValidUTF8(s[max(0, i-10):end], "�")
}

// FuzzTelegramHTML: rendering never panics and always gives HTML that
// Telegram's parse_mode "HTML" accepts.
func FuzzTelegramHTML(f *testing.F) {
	fuzzRenderer(f, "TelegramHTML", markup.TelegramHTML, func(md, out string) string {
		if msg := checkTelegramHTML(out); msg != "" {
			return msg
		}
		if utf8.ValidString(md) && !utf8.ValidString(out) {
			return "invalid UTF-8 from valid input"
		}
		return ""
	})
}

// fuzzRenderer fuzzes render from the Markdown seeds: it must never
// panic, and check says what is wrong with what it gives for md, "" for
// nothing.
func fuzzRenderer(f *testing.F, name string, render func(string) string, check func(md, out string) string) {
	for _, s := range append(markdownSeeds, longFence) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := render(md)
		if msg := check(md, out); msg != "" {
			t.Fatalf("%s(%q) = %q: %s", name, md, out, msg)
		}
	})
}

// FuzzSlackMrkdwn: rendering never panics and escapes every character
// Slack treats as markup outside the links it writes.
func FuzzSlackMrkdwn(f *testing.F) {
	fuzzRenderer(f, "SlackMrkdwn", markup.SlackMrkdwn, func(_, out string) string { return checkSlackMrkdwn(out) })
}

// unsafeHTML finds what must never reach the web chat's page.
var unsafeHTML = regexp.MustCompile(`(?i)<\s*(script|iframe|object|embed|style|link|meta)\b|<[^>]*\son[a-z]+\s*=`)

// urlAttr finds every URL attribute and its value.
var urlAttr = regexp.MustCompile(`(?i)\s(?:href|src|action|formaction)\s*=\s*("[^"]*"|'[^']*'|[^\s>]*)`)

// FuzzHTML: the web chat's HTML never carries scripts or event handlers,
// and every URL in it is relative or of a safe scheme, whatever the
// Markdown holds.
func FuzzHTML(f *testing.F) {
	fuzzRenderer(f, "HTML", markup.HTML, func(_, out string) string {
		if loc := unsafeHTML.FindStringIndex(out); loc != nil {
			return fmt.Sprintf("unsafe %q", out[loc[0]:loc[1]])
		}
		for _, m := range urlAttr.FindAllStringSubmatch(out, -1) {
			v := m[1]
			if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
				v = v[1 : len(v)-1]
			}
			if s := linkScheme(v); s != "" && !safeSchemes[s] {
				return fmt.Sprintf("%s: URL of scheme %q", m[0], s)
			}
		}
		return ""
	})
}

// FuzzSplit: every piece is non-empty and within the limit, and text
// within the limit comes back whole.
func FuzzSplit(f *testing.F) {
	for _, s := range markdownSeeds {
		f.Add(s, uint16(16))
		f.Add(s, uint16(64))
	}
	f.Add(strings.Repeat("word ", 2000), uint16(4000))
	f.Add("```\n"+strings.Repeat("code line\n", 50)+"```", uint16(100))
	f.Fuzz(func(t *testing.T, md string, limit uint16) {
		lim := max(16, int(limit)%5000)
		done := make(chan []string, 1)
		go func() { done <- markup.Split(md, lim) }()
		var pieces []string
		select {
		case pieces = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("Split(%q, %d) did not return within 5s", md, lim)
		}
		trimmed := strings.TrimSpace(md)
		if trimmed != "" && markup.Len(trimmed) <= lim && (len(pieces) != 1 || pieces[0] != trimmed) {
			t.Fatalf("Split(%q, %d) = %q: text within the limit not returned whole", md, lim, pieces)
		}
		for i, p := range pieces {
			if strings.TrimSpace(p) == "" {
				t.Fatalf("Split(%q, %d): piece %d is empty", md, lim, i)
			}
			if n := markup.Len(p); n > lim {
				t.Fatalf("Split(%q, %d): piece %d has %d units: %q", md, lim, i, n, p)
			}
		}
	})
}

// FuzzSplitRendered: every piece renders within most, unless it is down
// to 16 units, and is within the limit.
func FuzzSplitRendered(f *testing.F) {
	for _, s := range markdownSeeds {
		f.Add(s, uint16(40))
	}
	f.Add("| n | note |\n|---|---|\n| 0 | "+strings.Repeat("wide ", 60)+"|\n"+strings.Repeat("| 1 | x |\n", 60), uint16(400))
	f.Add(strings.Repeat("---\n\n", 100), uint16(200))
	shown := func(md string) int { return markup.Len(markup.Plain(md)) }
	f.Fuzz(func(t *testing.T, md string, limit uint16) {
		lim := max(16, int(limit)%5000)
		done := make(chan []string, 1)
		go func() { done <- markup.SplitRendered(md, lim, lim, shown) }()
		var pieces []string
		select {
		case pieces = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("SplitRendered(%q, %d) did not return within 5s", md, lim)
		}
		for i, p := range pieces {
			if strings.TrimSpace(p) == "" {
				t.Fatalf("SplitRendered(%q, %d): piece %d is empty", md, lim, i)
			}
			if n := shown(p); markup.Len(p) > lim || (n > lim && markup.Len(p) > 16) {
				t.Fatalf("SplitRendered(%q, %d): piece %d has %d units, renders to %d: %q", md, lim, i, markup.Len(p), n, p)
			}
		}
	})
}

func TestSplitLongFenceTerminates(t *testing.T) {
	text := "```" + strings.Repeat("l", 20) + "\n" + strings.Repeat("x ", 30) + "\n```"
	parts := markup.Split(text, 16)
	if len(parts) == 0 {
		t.Fatal("no parts")
	}
	for _, p := range parts {
		if markup.Len(p) > 16 {
			t.Errorf("part of %d units: %q", markup.Len(p), p)
		}
	}
	if got := markup.Split("😀😀", 1); len(got) == 0 {
		t.Error("a rune wider than the limit produced nothing")
	}
}

func TestSlackLinksWithUnsafeURLs(t *testing.T) {
	tests := []struct{ md, want string }{
		{`[a](<b\>c>)`, `a (b\&gt;c)`},
		{"[x](<a b>)", "x (a b)"},
		{"[site](https://e.com/?a=1&b=2)", "<https://e.com/?a=1&amp;b=2|site>"},
	}
	for _, tt := range tests {
		if got := markup.SlackMrkdwn(tt.md); !strings.Contains(got, tt.want) {
			t.Errorf("SlackMrkdwn(%q) = %q, want it to contain %q", tt.md, got, tt.want)
		}
	}
}
