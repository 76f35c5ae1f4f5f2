package web

import (
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

var blankLines = regexp.MustCompile(`\n{3,}`)

// Markdown renders an HTML fragment (readability's article) as markdown:
// headings, paragraphs, links, emphasis, lists, quotes, code and tables.
func Markdown(n *html.Node) string {
	var b strings.Builder
	md{&b}.node(n, 0)
	return strings.TrimSpace(blankLines.ReplaceAllString(b.String(), "\n\n"))
}

type md struct{ b *strings.Builder }

func (m md) children(n *html.Node, depth int) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		m.node(c, depth)
	}
}

func (m md) text(n *html.Node) string {
	var b strings.Builder
	md{&b}.children(n, 0)
	return strings.TrimSpace(b.String())
}

func (m md) node(n *html.Node, depth int) {
	switch n.Type {
	case html.TextNode:
		m.b.WriteString(collapse(n.Data))
		return
	case html.ElementNode:
	default:
		m.children(n, depth)
		return
	}
	switch n.DataAtom {
	case atom.Script, atom.Style, atom.Noscript, atom.Template:
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		level := int(n.Data[1] - '0')
		fmt.Fprintf(m.b, "\n\n%s %s\n\n", strings.Repeat("#", level), m.text(n))
	case atom.P, atom.Div, atom.Section, atom.Article, atom.Header, atom.Footer, atom.Figure:
		m.b.WriteString("\n\n")
		m.children(n, depth)
		m.b.WriteString("\n\n")
	case atom.Br:
		m.b.WriteString("\n")
	case atom.Hr:
		m.b.WriteString("\n\n---\n\n")
	case atom.A:
		label, href := m.text(n), attr(n, "href")
		switch {
		case href == "" || strings.HasPrefix(href, "javascript:"):
			m.b.WriteString(label)
		case label == "":
			m.b.WriteString("<" + href + ">")
		default:
			fmt.Fprintf(m.b, "[%s](%s)", label, href)
		}
	case atom.Strong, atom.B:
		if t := m.text(n); t != "" {
			m.b.WriteString("**" + t + "**")
		}
	case atom.Em, atom.I:
		if t := m.text(n); t != "" {
			m.b.WriteString("_" + t + "_")
		}
	case atom.Code:
		if n.Parent != nil && n.Parent.DataAtom == atom.Pre {
			m.children(n, depth)
			return
		}
		m.b.WriteString("`" + m.text(n) + "`")
	case atom.Pre:
		fmt.Fprintf(m.b, "\n\n```\n%s\n```\n\n", strings.Trim(rawText(n), "\n"))
	case atom.Blockquote:
		lines := strings.Split(m.text(n), "\n")
		m.b.WriteString("\n\n")
		for _, l := range lines {
			m.b.WriteString("> " + l + "\n")
		}
		m.b.WriteString("\n")
	case atom.Ul, atom.Ol:
		m.b.WriteString("\n")
		i := 0
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode || c.DataAtom != atom.Li {
				continue
			}
			i++
			bullet := "- "
			if n.DataAtom == atom.Ol {
				bullet = fmt.Sprintf("%d. ", i)
			}
			var item strings.Builder
			md{&item}.children(c, depth+1)
			text := strings.TrimSpace(blankLines.ReplaceAllString(item.String(), "\n"))
			text = strings.ReplaceAll(text, "\n", "\n"+strings.Repeat("  ", depth+1))
			fmt.Fprintf(m.b, "\n%s%s%s", strings.Repeat("  ", depth), bullet, text)
		}
		m.b.WriteString("\n\n")
	case atom.Img:
		if src := attr(n, "src"); src != "" {
			fmt.Fprintf(m.b, "![%s](%s)", attr(n, "alt"), src)
		}
	case atom.Table:
		m.b.WriteString("\n\n")
		first := true
		var walk func(*html.Node)
		walk = func(t *html.Node) {
			for c := t.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && c.DataAtom == atom.Tr {
					var cells []string
					for td := c.FirstChild; td != nil; td = td.NextSibling {
						if td.Type == html.ElementNode && (td.DataAtom == atom.Td || td.DataAtom == atom.Th) {
							cells = append(cells, strings.ReplaceAll(m.text(td), "\n", " "))
						}
					}
					fmt.Fprintf(m.b, "| %s |\n", strings.Join(cells, " | "))
					if first {
						fmt.Fprintf(m.b, "|%s\n", strings.Repeat(" --- |", len(cells)))
						first = false
					}
					continue
				}
				walk(c)
			}
		}
		walk(n)
		m.b.WriteString("\n")
	default:
		m.children(n, depth)
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func rawText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// collapse folds runs of whitespace in running text to one space.
func collapse(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		if s != "" {
			return " "
		}
		return ""
	}
	out := strings.Join(f, " ")
	if strings.TrimLeft(s, " \t\n\r") != s {
		out = " " + out
	}
	if strings.TrimRight(s, " \t\n\r") != s {
		out += " "
	}
	return out
}
