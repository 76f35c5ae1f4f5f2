package patch_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/patch"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/toolstest"
)

func args(p string, dry bool) string {
	if dry {
		return `{"patch":` + quote(p) + `,"dry_run":true}`
	}
	return `{"patch":` + quote(p) + `}`
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

func TestApplyPatch(t *testing.T) {
	ws := toolstest.Workspace(t)
	toolstest.WriteFile(t, ws, "app.py", "import os\n\ndef greet():\n    print(\"hi\")\n\ndef main():\n    greet()\n")
	toolstest.WriteFile(t, ws, "old.txt", "bye\n")
	toolstest.WriteFile(t, ws, "win.txt", "a\r\nb\r\nc\r\n")
	toolstest.WriteFile(t, ws, "mv.txt", "keep\n")
	p := `*** Begin Patch
*** Add File: docs/new.md
+# New
+text
*** Delete File: old.txt
*** Update File: app.py
@@ def greet():
-    print("hi")
+    print("hello")
@@ def main():
     greet()
+    greet()
*** End of File
*** Update File: win.txt
 a
-b
+B
*** Update File: mv.txt
*** Move to: moved/mv.txt
*** End Patch`
	res, err := toolstest.Run(t, patch.Tool(), ws, args(p, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- add docs/new.md (+2)", "- delete old.txt", "- update app.py (+2/-1)", "- move mv.txt -> moved/mv.txt"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("summary lacks %q:\n%s", want, res.Text)
		}
	}
	checks := map[string]string{
		"docs/new.md":  "# New\ntext\n",
		"app.py":       "import os\n\ndef greet():\n    print(\"hello\")\n\ndef main():\n    greet()\n    greet()\n",
		"win.txt":      "a\r\nB\r\nc\r\n",
		"moved/mv.txt": "keep\n",
	}
	for f, want := range checks {
		if got := toolstest.ReadFile(t, ws, f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	for _, gone := range []string{"old.txt", "mv.txt"} {
		if _, err := os.Stat(filepath.Join(ws.Dir(), gone)); err == nil {
			t.Errorf("%s still exists", gone)
		}
	}
}

func TestApplyPatchIsAllOrNothing(t *testing.T) {
	ws := toolstest.Workspace(t)
	toolstest.WriteFile(t, ws, "a.txt", "one\n")
	toolstest.WriteFile(t, ws, "b.txt", "two\n")
	p := "*** Begin Patch\n*** Update File: a.txt\n-one\n+ONE\n*** Update File: b.txt\n-three\n+THREE\n*** End Patch"
	_, err := toolstest.Run(t, patch.Tool(), ws, args(p, false))
	if !errors.Is(err, patch.ErrBadPatch) || !strings.Contains(err.Error(), "chunk 1 of b.txt does not match") {
		t.Fatalf("err = %v", err)
	}
	if got := toolstest.ReadFile(t, ws, "a.txt"); got != "one\n" {
		t.Errorf("a.txt changed by a failed patch: %q", got)
	}
}

func TestApplyPatchDryRun(t *testing.T) {
	ws := toolstest.Workspace(t)
	toolstest.WriteFile(t, ws, "a.txt", "one\n")
	p := "*** Begin Patch\n*** Update File: a.txt\n-one\n+ONE\n*** End Patch"
	res, err := toolstest.Run(t, patch.Tool(), ws, args(p, true))
	if err != nil || !strings.Contains(res.Text, "dry run") {
		t.Fatalf("%v %q", err, res.Text)
	}
	if got := toolstest.ReadFile(t, ws, "a.txt"); got != "one\n" {
		t.Errorf("dry run wrote: %q", got)
	}
}

func TestApplyPatchErrors(t *testing.T) {
	tests := []struct {
		name, patch string
		want        error
		msg         string
	}{
		{"no begin", "*** Update File: a.txt\n-one\n+1\n*** End Patch", patch.ErrBadPatch, "must start with"},
		{"no end", "*** Begin Patch\n*** Update File: a.txt\n-one\n+1", patch.ErrBadPatch, "must end with"},
		{"bad header", "*** Begin Patch\n*** Frobnicate: a.txt\n*** End Patch", patch.ErrBadPatch, "expected \"*** Add File:\""},
		{"add without plus", "*** Begin Patch\n*** Add File: n.txt\nno plus\n*** End Patch", patch.ErrBadPatch, "starts with \"+\""},
		{"add existing", "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch", patch.ErrBadPatch, "already exists"},
		{"update missing", "*** Begin Patch\n*** Update File: nope.txt\n-a\n+b\n*** End Patch", nil, "no such file"},
		{"anchor missing", "*** Begin Patch\n*** Update File: a.txt\n@@ def nothing():\n-one\n+1\n*** End Patch", patch.ErrBadPatch, "line after @@"},
		{"outside", "*** Begin Patch\n*** Add File: ../evil.txt\n+x\n*** End Patch", sandbox.ErrOutsideWorkspace, "outside the workspace"},
		{"absolute outside", "*** Begin Patch\n*** Delete File: /etc/hosts\n*** End Patch", sandbox.ErrOutsideWorkspace, "outside the workspace"},
		{"empty", "*** Begin Patch\n*** End Patch", patch.ErrBadPatch, "changes nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := toolstest.Workspace(t)
			toolstest.WriteFile(t, ws, "a.txt", "one\n")
			_, err := toolstest.Run(t, patch.Tool(), ws, args(tt.patch, false))
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %v %q", err, tt.want, tt.msg)
			}
			if got := toolstest.ReadFile(t, ws, "a.txt"); got != "one\n" {
				t.Errorf("a.txt = %q", got)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(ws.Dir()), "evil.txt")); err == nil {
				t.Error("a file was written outside the workspace")
			}
		})
	}
}

func TestApplyPatchFence(t *testing.T) {
	ws := toolstest.Workspace(t)
	toolstest.WriteFile(t, ws, "a.txt", "one  \ntwo\n")
	// Wrapped in a code fence, trailing whitespace differing.
	p := "```\n*** Begin Patch\n*** Update File: a.txt\n one\n-two\n+2\n*** End Patch\n```"
	if _, err := toolstest.Run(t, patch.Tool(), ws, args(p, false)); err != nil {
		t.Fatal(err)
	}
	if got := toolstest.ReadFile(t, ws, "a.txt"); got != "one  \n2\n" {
		t.Errorf("a.txt = %q", got)
	}
}

// TestApplyPatchLongContextOfEqualLines: a chunk of 40,000 blank context
// lines and a line the file lacks, against a file of 400,000 blank lines,
// is refused at once; the window-by-window search was still comparing
// after 20 s, and nothing stops it.
func TestApplyPatchLongContextOfEqualLines(t *testing.T) {
	ws := toolstest.Workspace(t)
	toolstest.WriteFile(t, ws, "blank.txt", strings.Repeat("\n", 400_000))
	p := "*** Begin Patch\n*** Update File: blank.txt\n" + strings.Repeat(" \n", 40_000) + "-x\n+y\n*** End Patch"
	if _, err := toolstest.RunWithin(t, 20*time.Second, patch.Tool(), ws, args(p, false)); !errors.Is(err, patch.ErrBadPatch) {
		t.Fatalf("err = %v, want ErrBadPatch", err)
	}
}
