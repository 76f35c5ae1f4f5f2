package mcp

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
)

// MaxToolName is the longest tool name providers accept.
const MaxToolName = 64

const hashLen = 8

// kind is what a tool wraps.
type kind int

const (
	kindTool kind = iota
	kindResource
	kindTemplate
	kindPrompt
)

func (k kind) String() string {
	switch k {
	case kindResource:
		return "resource"
	case kindTemplate:
		return "resource template"
	case kindPrompt:
		return "prompt"
	}
	return "tool"
}

var (
	notNameChar = regexp.MustCompile(`[^A-Za-z0-9_-]`)
	underscores = regexp.MustCompile(`_+`)
)

// sanitize keeps what providers allow in a tool name ([A-Za-z0-9_-]) and
// collapses runs of '_', as nanobot does.
func sanitize(s string) string {
	return underscores.ReplaceAllString(notNameChar.ReplaceAllString(s, "_"), "_")
}

func shortHash(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])[:hashLen]
}

// baseName is the tool name an item would get on its own:
// mcp_<server>_<name>, mcp_<server>_resource_<name> or
// mcp_<server>_prompt_<name>, sanitized, and cut to [MaxToolName]
// characters with a hash of the whole when longer (as nanobot does).
func baseName(server string, k kind, raw string) string {
	infix := ""
	switch k {
	case kindResource, kindTemplate:
		infix = "resource_"
	case kindPrompt:
		infix = "prompt_"
	}
	name := sanitize("mcp_" + server + "_" + infix + raw)
	if len(name) <= MaxToolName {
		return name
	}
	return name[:MaxToolName-hashLen-1] + "_" + shortHash(name)
}

// assignNames gives each item of one server its tool name. Items whose
// base names clash (a tool "a.b" and a tool "a_b"; a tool "resource_x" and
// a resource "x") all get a hash of their kind and own name instead, so
// that a name never depends on the order the server lists its items in.
// Items listed twice (same kind and name) are dropped; so are items
// without a name. It returns the items kept, sorted by tool name.
func assignNames(server string, items []*item) []*item {
	seen := map[string]bool{}
	kept := items[:0:0]
	for _, it := range items {
		id := it.identity()
		if it.raw == "" || seen[id] {
			continue
		}
		seen[id] = true
		it.base = baseName(server, it.kind, it.raw)
		kept = append(kept, it)
	}
	count := map[string]int{}
	for _, it := range kept {
		count[it.base]++
	}
	for _, it := range kept {
		it.name = it.base
		if count[it.base] > 1 {
			cut := min(len(it.base), MaxToolName-hashLen-1)
			it.name = it.base[:cut] + "_" + shortHash(it.identity())
		}
	}
	slices.SortFunc(kept, func(a, b *item) int { return cmp.Compare(a.name, b.name) })
	// A hash clash between two clashing names is astronomically unlikely;
	// drop the later one rather than serve two tools under one name.
	return slices.CompactFunc(kept, func(a, b *item) bool { return a.name == b.name })
}

// enabled reports whether an enabledTools entry names the item: a tool by
// its own name, any item by its tool name (before or after clash
// handling).
func enabled(entries []string, it *item) bool {
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "*" || e == it.name || e == it.base || (it.kind == kindTool && e == it.raw) {
			return true
		}
	}
	return false
}
