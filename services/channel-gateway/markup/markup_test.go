package markup_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// renderCase is Markdown in and what a renderer must give for it.
type renderCase struct{ name, in, want string }

// checkRender runs each case through render as a subtest.
func checkRender(t *testing.T, name string, render func(string) string, tests []renderCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render(tt.in); got != tt.want {
				t.Errorf("%s(%q)\n got %q\nwant %q", name, tt.in, got, tt.want)
			}
		})
	}
}

func TestTelegramHTML(t *testing.T) {
	checkRender(t, "TelegramHTML", markup.TelegramHTML, []renderCase{
		{"plain", "hello", "hello"},
		{"escapes", "a < b & c > d", "a &lt; b &amp; c &gt; d"},
		{"bold italic", "**bold** and *it*", "<b>bold</b> and <i>it</i>"},
		{"strike", "~~gone~~", "<s>gone</s>"},
		{"inline code", "run `ls <dir>`", "run <code>ls &lt;dir&gt;</code>"},
		{"fenced", "```go\nfmt.Println(\"<x>\")\n```", "<pre><code class=\"language-go\">fmt.Println(&quot;&lt;x&gt;&quot;)</code></pre>"},
		{"link", "[site](https://x.org/?a=1&b=2)", `<a href="https://x.org/?a=1&amp;b=2">site</a>`},
		{"heading", "# Title\n\ntext", "<b>Title</b>\n\ntext"},
		{"list", "- one\n- two", "• one\n• two"},
		{"ordered", "3. a\n4. b", "3. a\n4. b"},
		{"nested list", "- a\n  - b", "• a\n  • b"},
		{"quote", "> wise", "<blockquote>wise</blockquote>"},
		{"raw html shown", "<script>x</script>", "&lt;script&gt;x&lt;/script&gt;"},
		{"escaped markdown", `\*not bold\*`, "*not bold*"},
		{"paragraphs", "one\n\ntwo", "one\n\ntwo"},
		{"table", "| a | b |\n|---|---|\n| 1 | 22 |", "<pre>a | b \n--+---\n1 | 22</pre>"},
	})
}

func TestSlackMrkdwn(t *testing.T) {
	checkRender(t, "SlackMrkdwn", markup.SlackMrkdwn, []renderCase{
		{"bold italic", "**bold** and *it*", "*bold* and _it_"},
		{"strike", "~~gone~~", "~gone~"},
		{"escapes", "a < b & c", "a &lt; b &amp; c"},
		{"link", "[site](https://x.org)", "<https://x.org|site>"},
		{"link label over two lines", "[the\nsite](https://x.org)", "<https://x.org|the site>"},
		{"autolink", "<https://x.org>", "<https://x.org>"},
		{"heading", "## Head", "*Head*"},
		{"code block", "```\nx := 1\n```", "```\nx := 1\n```"},
		{"quote", "> a\n> b", "> a\n> b"},
		{"list", "* a\n* b", "• a\n• b"},
	})
}

func TestWhatsApp(t *testing.T) {
	checkRender(t, "WhatsApp", markup.WhatsApp, []renderCase{
		{"bold italic", "**bold** and *it*", "*bold* and _it_"},
		{"strike", "~~gone~~", "~gone~"},
		{"no escapes", "a < b & c", "a < b & c"},
		{"inline code", "run `ls`", "run `ls`"},
		{"code block", "```go\nx := 1\n```", "```\nx := 1\n```"},
		{"link", "[site](https://x.org)", "site (https://x.org)"},
		{"bare link", "<https://x.org>", "https://x.org"},
		{"heading", "## Head", "*Head*"},
		{"quote", "> a\n> b", "> a\n> b"},
		{"list", "- a\n- b", "• a\n• b"},
	})
}

func TestHTMLIsSafe(t *testing.T) {
	got := markup.HTML("**hi** <img src=x onerror=alert(1)>\n\n```js\nalert(1)\n```")
	if strings.Contains(got, "<img") {
		t.Errorf("raw HTML passed through: %s", got)
	}
	for _, want := range []string{"<strong>hi</strong>", `<code class="language-js">`} {
		if !strings.Contains(got, want) {
			t.Errorf("HTML() = %s, missing %s", got, want)
		}
	}
}

func TestPlain(t *testing.T) {
	if got := markup.Plain("**a** [b](https://c)"); got != "a b (https://c)" {
		t.Errorf("Plain = %q", got)
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short is whole", "hello", 10, "hello"},
		{"exactly n is whole", "hello", 5, "hello"},
		{"long is cut to n with the ellipsis", "hello world", 6, "hello…"},
		{"runes, not bytes", "héllo wörld", 6, "héllo…"},
		// Telegram counts UTF-16 units: an emoji outside the BMP is two.
		{"UTF-16 units, as Len", "ab😀😀😀", 5, "ab😀…"},
		{"an emoji that would cross n is left out whole", "ab😀😀😀", 4, "ab…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := markup.Truncate(tt.in, tt.n)
			if got != tt.want {
				t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
			if markup.Len(got) > tt.n {
				t.Errorf("Truncate(%q, %d) is %d UTF-16 units long", tt.in, tt.n, markup.Len(got))
			}
		})
	}
}

func TestSplit(t *testing.T) {
	para := strings.Repeat("word ", 19) + "end." // 99 chars
	var paras []string
	for range 90 {
		paras = append(paras, para)
	}
	nineK := strings.Join(paras, "\n\n") // 90*99 + 89*2 = 9088
	tests := []struct {
		name  string
		in    string
		limit int
		want  int
	}{
		{"empty", "  ", 4000, 0},
		{"short", "hello", 4000, 1},
		{"9000 chars in paragraphs", nineK, 4000, 3},
		{"9000 chars without breaks", strings.Repeat("x", 9000), 4000, 3},
		{"long words", strings.Repeat("abcdefghi ", 900), 4000, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := markup.Split(tt.in, tt.limit)
			if len(parts) != tt.want {
				t.Fatalf("got %d parts, want %d", len(parts), tt.want)
			}
			total := 0
			for _, p := range parts {
				if markup.Len(p) > tt.limit {
					t.Errorf("part of %d > limit %d", markup.Len(p), tt.limit)
				}
				total += len(strings.Join(strings.Fields(p), ""))
			}
			if want := len(strings.Join(strings.Fields(tt.in), "")); total != want {
				t.Errorf("non-space chars: got %d, want %d", total, want)
			}
		})
	}
}

// TestSplitRendered: pieces are cut again until what they render to fits,
// and pieces that fit are Split's.
func TestSplitRendered(t *testing.T) {
	// A table is padded to its widest cell on every row: 60 short rows
	// and one of 300 characters render to over 18,000.
	rows := []string{"| n | note |", "|---|---|", "| 0 | " + strings.Repeat("wide ", 60) + "|"}
	for i := range 60 {
		rows = append(rows, fmt.Sprintf("| %d | x |", i+1))
	}
	table := strings.Join(rows, "\n")
	shown := func(md string) int { return markup.Len(markup.Plain(md)) }
	tests := []struct {
		name   string
		md     string
		pieces int // 0: more than one
	}{
		{"plain text is Split's", strings.Repeat("word ", 300), 1},
		{"padded table", table, 0},
		{"thematic breaks", strings.Repeat("---\n\n", 700), 0},
		{"emoji outside the BMP in a table", strings.ReplaceAll(table, "wide", "😀😀"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const limit, most = 4000, 4096
			got := markup.SplitRendered(tt.md, limit, most, shown)
			if tt.pieces > 0 && !slices.Equal(got, markup.Split(tt.md, limit)) {
				t.Errorf("got %d pieces, not Split's", len(got))
			}
			if tt.pieces == 0 && len(got) < 2 {
				t.Errorf("got %d piece of %d rendered units", len(got), shown(tt.md))
			}
			for i, p := range got {
				if n := shown(p); n > most || markup.Len(p) > limit {
					t.Errorf("piece %d renders to %d units (most %d), Markdown %d (limit %d)", i, n, most, markup.Len(p), limit)
				}
			}
		})
	}
}

// TestTruncateRendered: text is cut until what it renders to fits, and
// text that fits comes back whole.
func TestTruncateRendered(t *testing.T) {
	shown := func(md string) int { return markup.Len(markup.SlackMrkdwn(md)) }
	tests := []struct {
		name string
		md   string
		most int
	}{
		{"fits whole", "a & b", 100},
		{"escapes grow fivefold", strings.Repeat("&", 10000), 40000},
		{"emoji outside the BMP", strings.Repeat("😀&", 5000), 10000},
		{"plain", strings.Repeat("word ", 2000), 4000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := markup.TruncateRendered(tt.md, tt.most, shown)
			if n := shown(got); n > tt.most {
				t.Errorf("renders to %d units, most %d", n, tt.most)
			}
			if shown(tt.md) <= tt.most && got != tt.md {
				t.Errorf("text that fits was cut: %q", got)
			}
			if got != tt.md && (!strings.HasSuffix(got, "…") || !strings.HasPrefix(tt.md, strings.TrimSuffix(got, "…"))) {
				t.Errorf("not a prefix and an ellipsis: %.20q…", got)
			}
		})
	}
}

func TestSplitKeepsParagraphsWhole(t *testing.T) {
	a, b := strings.Repeat("a", 60), strings.Repeat("b", 60)
	parts := markup.Split(a+"\n\n"+b, 100)
	if len(parts) != 2 || parts[0] != a || parts[1] != b {
		t.Errorf("parts = %q", parts)
	}
}

func TestSplitReopensCodeFence(t *testing.T) {
	var lines []string
	for range 40 {
		lines = append(lines, "fmt.Println(\"some line of code\")")
	}
	md := "Intro\n\n```go\n" + strings.Join(lines, "\n") + "\n\n" + strings.Join(lines, "\n") + "\n```\n\nOutro"
	parts := markup.Split(md, 1000)
	if len(parts) < 3 {
		t.Fatalf("got %d parts", len(parts))
	}
	for i, p := range parts {
		if strings.Count(p, "```")%2 != 0 {
			t.Errorf("part %d has an unbalanced fence:\n%s", i, p)
		}
		if markup.Len(p) > 1000 {
			t.Errorf("part %d too long: %d", i, markup.Len(p))
		}
	}
	if !strings.HasPrefix(parts[1], "```go\n") {
		t.Errorf("second part does not reopen the fence: %q", parts[1][:20])
	}
}

func TestLenCountsUTF16(t *testing.T) {
	if n := markup.Len("a😀"); n != 3 {
		t.Errorf("Len = %d, want 3", n)
	}
}

func TestLinkSchemes(t *testing.T) {
	tests := []struct {
		name, md              string
		telegram, slack, html string
	}{
		{"https", "[x](https://x.org)", `<a href="https://x.org">x</a>`, "<https://x.org|x>", `<a href="https://x.org">x</a>`},
		{"mailto", "[m](mailto:a@b.c)", `<a href="mailto:a@b.c">m</a>`, "<mailto:a@b.c|m>", `<a href="mailto:a@b.c">m</a>`},
		{"upper case scheme", "[x](HTTPS://x.org)", `<a href="HTTPS://x.org">x</a>`, "<HTTPS://x.org|x>", `<a href="HTTPS://x.org">x</a>`},
		{"javascript", "[x](jAvAsCript:alert(1))", "x (jAvAsCript:alert(1))", "x (jAvAsCript:alert(1))", "<p>x</p>"},
		{"data", "[x](data:text/html,hi)", "x (data:text/html,hi)", "x (data:text/html,hi)", "<p>x</p>"},
		{"tel autolink", "<tel:123>", "tel:123", "tel:123", "<p>tel:123</p>"},
		{"relative", "[x](jAvAsCript)", "x (jAvAsCript)", "x (jAvAsCript)", `<p><a href="jAvAsCript">x</a></p>`},
		{"slack mention", "[x](<!channel>)", "x (!channel)", "x (!channel)", `<p><a href="!channel">x</a></p>`},
		{"image data", "![pic](data:image/svg+xml,x)", "pic (data:image/svg+xml,x)", "pic (data:image/svg+xml,x)", "<p>pic</p>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := markup.TelegramHTML(tt.md); got != tt.telegram {
				t.Errorf("TelegramHTML(%q) = %q, want %q", tt.md, got, tt.telegram)
			}
			if got := markup.SlackMrkdwn(tt.md); got != tt.slack {
				t.Errorf("SlackMrkdwn(%q) = %q, want %q", tt.md, got, tt.slack)
			}
			if got := strings.TrimSpace(markup.HTML(tt.md)); !strings.Contains(got, tt.html) {
				t.Errorf("HTML(%q) = %q, want it to contain %q", tt.md, got, tt.html)
			}
		})
	}
}
