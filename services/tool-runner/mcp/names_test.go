package mcp

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestBaseName(t *testing.T) {
	long := strings.Repeat("x", 80)
	cases := []struct {
		server string
		k      kind
		raw    string
		want   string
	}{
		{"everything", kindTool, "echo", "mcp_everything_echo"},
		{"everything", kindTool, "get-sum", "mcp_everything_get-sum"},
		{"fs", kindTool, "read.file/v2", "mcp_fs_read_file_v2"},
		{"fs", kindTool, "a__b", "mcp_fs_a_b"},
		{"fs", kindResource, "README.md", "mcp_fs_resource_README_md"},
		{"fs", kindTemplate, "file", "mcp_fs_resource_file"},
		{"fs", kindPrompt, "review code", "mcp_fs_prompt_review_code"},
		{"s", kindTool, "日本", "mcp_s_"},
	}
	for _, c := range cases {
		if got := baseName(c.server, c.k, c.raw); got != c.want {
			t.Errorf("baseName(%s, %v, %q) = %q, want %q", c.server, c.k, c.raw, got, c.want)
		}
	}
	got := baseName("s", kindTool, long)
	if len(got) != MaxToolName || !strings.HasPrefix(got, "mcp_s_xxxx") || got == baseName("s", kindTool, long+"y") {
		t.Errorf("long name %q (%d)", got, len(got))
	}
}

// TestAssignNamesIndependentOfOrder: clashing names get hashes, every
// name is unique and at most 64 characters, whatever the listing order.
func TestAssignNamesIndependentOfOrder(t *testing.T) {
	long := strings.Repeat("y", 70)
	mk := func() []*item {
		return []*item{
			{kind: kindTool, raw: "a.b"},
			{kind: kindTool, raw: "a_b"},
			{kind: kindTool, raw: "resource_x"},
			{kind: kindResource, raw: "x"},
			{kind: kindTool, raw: "plain"},
			{kind: kindTool, raw: "plain"}, // listed twice
			{kind: kindTool, raw: ""},      // nameless
			{kind: kindTool, raw: long + "1"},
			{kind: kindTool, raw: long + "2"},
			{kind: kindPrompt, raw: "p"},
		}
	}
	names := func(items []*item) string {
		var out []string
		for _, it := range items {
			out = append(out, fmt.Sprintf("%s=%s/%s", it.name, it.kind, it.raw))
		}
		return strings.Join(out, "\n")
	}
	want := names(assignNames("srv", mk()))
	for i := range 20 {
		items := mk()
		rand.New(rand.NewPCG(uint64(i), 7)).Shuffle(len(items), func(a, b int) { items[a], items[b] = items[b], items[a] })
		if got := names(assignNames("srv", items)); got != want {
			t.Fatalf("order %d gave\n%s\nwant\n%s", i, got, want)
		}
	}
	kept := assignNames("srv", mk())
	if len(kept) != 8 {
		t.Fatalf("kept %d items:\n%s", len(kept), want)
	}
	seen := map[string]bool{}
	for _, it := range kept {
		if seen[it.name] || len(it.name) > MaxToolName || sanitize(it.name) != it.name {
			t.Errorf("bad name %q", it.name)
		}
		seen[it.name] = true
	}
	for _, it := range kept {
		switch it.raw {
		case "plain", "p":
			if it.name != it.base {
				t.Errorf("%s: a name without clash changed: %s", it.raw, it.name)
			}
		case "a.b", "a_b", "resource_x", "x":
			if it.name == it.base || !strings.HasPrefix(it.name, it.base+"_") {
				t.Errorf("%s: a clashing name kept its base: %s", it.raw, it.name)
			}
		}
	}
}

func TestEnabled(t *testing.T) {
	tool := &item{kind: kindTool, raw: "echo", base: "mcp_s_echo", name: "mcp_s_echo"}
	res := &item{kind: kindResource, raw: "echo", base: "mcp_s_resource_echo", name: "mcp_s_resource_echo"}
	cases := []struct {
		entries []string
		it      *item
		want    bool
	}{
		{[]string{"echo"}, tool, true},
		{[]string{"mcp_s_echo"}, tool, true},
		{[]string{" echo "}, tool, true},
		{[]string{"*"}, tool, true},
		{[]string{"other"}, tool, false},
		{nil, tool, false},
		{[]string{"echo"}, res, false}, // a raw name names tools only
		{[]string{"mcp_s_resource_echo"}, res, true},
	}
	for _, c := range cases {
		if got := enabled(c.entries, c.it); got != c.want {
			t.Errorf("enabled(%q, %s) = %v", c.entries, c.it.name, got)
		}
	}
}
