package files_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/files"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/toolstest"
)

func TestReadFile(t *testing.T) {
	ws := toolstest.Workspace(t)
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	toolstest.WriteFile(t, ws, "notes.txt", strings.Join(lines, "\n")+"\n")
	toolstest.WriteFile(t, ws, "crlf.txt", "a\r\nb\r\n")
	toolstest.WriteFile(t, ws, "empty.txt", "")
	toolstest.WriteFile(t, ws, "long.txt", strings.Repeat("x", 3*files.MaxLineChars)+"\nshort\n")
	tests := []struct {
		name, args string
		want       []string
		notWant    []string
	}{
		{"whole", `{"path":"notes.txt"}`, []string{"1| line 1\n", "30| line 30\n", "(End of file — 30 lines total)"}, nil},
		{"page", `{"path":"notes.txt","offset":"10","limit":5}`, []string{"10| line 10\n", "14| line 14\n", "(Showing lines 10-14 of 30. Use offset=15 to continue.)"}, []string{"15| line 15", "9| line 9"}},
		{"absolute inside", fmt.Sprintf(`{"path":%q}`, filepath.Join(ws.Dir(), "notes.txt")), []string{"1| line 1"}, nil},
		{"crlf", `{"path":"crlf.txt"}`, []string{"1| a\n2| b\n"}, []string{"\r"}},
		{"empty", `{"path":"empty.txt"}`, []string{"(Empty file: empty.txt)"}, nil},
		{"long line cut", `{"path":"long.txt"}`, []string{"[line cut at 4000 characters]", "2| short"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := toolstest.Run(t, files.ReadFile(), ws, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Text, w) {
					t.Errorf("missing %q in\n%s", w, res.Text)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(res.Text, w) {
					t.Errorf("unexpected %q in\n%s", w, res.Text)
				}
			}
		})
	}
}

func TestReadFileCapsCharacters(t *testing.T) {
	ws := toolstest.Workspace(t)
	line := strings.Repeat("y", 999)
	toolstest.WriteFile(t, ws, "big.txt", strings.Repeat(line+"\n", 500))
	res, err := toolstest.Run(t, files.ReadFile(), ws, `{"path":"big.txt","limit":100000}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Text) > files.MaxReadChars+200 {
		t.Errorf("returned %d chars, cap is %d", len(res.Text), files.MaxReadChars)
	}
	if !strings.Contains(res.Text, "of 500. Use offset=") {
		t.Errorf("no continuation note: %s", res.Text[len(res.Text)-200:])
	}
}

func TestReadFileErrors(t *testing.T) {
	ws := toolstest.Workspace(t)
	toolstest.WriteFile(t, ws, "a.txt", "one\n")
	toolstest.WriteFile(t, ws, "bin.dat", "\x7fELF\x00\x00\x01binary")
	toolstest.WriteFile(t, ws, "dir/x", "")
	tests := []struct {
		args string
		want error
		msg  string
	}{
		{`{}`, toolschema.ErrInvalidArguments, `missing required argument "path"`},
		{`{"path":"a.txt","offset":0}`, toolschema.ErrInvalidArguments, `argument "offset": must be >= 1`},
		{`{"path":"missing.txt"}`, fs.ErrNotExist, "no such file"},
		{`{"path":"dir"}`, sandbox.ErrIsDirectory, "is a directory"},
		{`{"path":"bin.dat"}`, files.ErrBinary, "binary"},
		{`{"path":"a.txt","offset":5}`, nil, "beyond the end"},
		{`{"path":"/etc/passwd"}`, sandbox.ErrOutsideWorkspace, "outside the workspace"},
		{`{"path":"/dev/zero"}`, sandbox.ErrDenied, "outside the workspace"},
	}
	for _, tt := range tests {
		_, err := toolstest.Run(t, files.ReadFile(), ws, tt.args)
		if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("read_file %s: %v, want %v (%q)", tt.args, err, tt.want, tt.msg)
		}
	}
}

// A 1x1 PNG.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func TestReadFileImage(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	blobs, err := b.Blobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws := toolstest.Workspace(t)
	toolstest.WriteFile(t, ws, "pics/dot.png", string(png))
	res, err := toolstest.Run(t, files.ReadFile(), ws, `{"path":"pics/dot.png"}`, func(c *tools.Call) { c.Blobs = blobs })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Media) != 1 || res.Media[0].GetMimeType() != "image/png" || res.Media[0].GetName() != "dot.png" {
		t.Fatalf("media = %v", res.Media)
	}
	if !strings.HasPrefix(res.Media[0].GetObject(), tools.SessionObjectPrefix(tools.MediaPrefix, "test:1")) {
		t.Errorf("object %q is not in the session's media space", res.Media[0].GetObject())
	}
	stored, err := blobs.GetBytes(ctx, res.Media[0].GetObject())
	if err != nil || string(stored) != string(png) {
		t.Errorf("stored image: %v", err)
	}
}

func TestWriteFile(t *testing.T) {
	ws := toolstest.Workspace(t)
	res, err := toolstest.Run(t, files.WriteFile(), ws, `{"path":"deep/er/new.md","content":"# hi\n"}`)
	if err != nil || !strings.Contains(res.Text, "Wrote 5 bytes") {
		t.Fatalf("%v %q", err, res.Text)
	}
	if got := toolstest.ReadFile(t, ws, "deep/er/new.md"); got != "# hi\n" {
		t.Errorf("content %q", got)
	}
	if os.Geteuid() == 0 {
		fi, _ := os.Stat(filepath.Join(ws.Dir(), "deep/er/new.md"))
		if uid := fileUID(fi); uid != sandbox.DefaultConfig().HostUID {
			t.Errorf("written file owned by %d, want the sandbox user", uid)
		}
	}
	for _, tt := range []struct{ args, msg string }{
		{`{"path":"x"}`, `missing required argument "content"`},
		{`{"path":"../x","content":""}`, "outside the workspace"},
		{`{"path":"~/x","content":""}`, `"~" is not expanded`},
		{`{"path":"deep","content":""}`, "is a directory"},
	} {
		if _, err := toolstest.Run(t, files.WriteFile(), ws, tt.args); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("write_file %s: %v, want %q", tt.args, err, tt.msg)
		}
	}
}

func TestEditFile(t *testing.T) {
	tests := []struct {
		name, content, args, want, err string
	}{
		{"unique", "a\nb\nc\n", `{"path":"f","old_text":"b","new_text":"B"}`, "a\nB\nc\n", ""},
		{"not found", "a\n", `{"path":"f","old_text":"zzz","new_text":"B"}`, "a\n", "old_text not found"},
		{"ambiguous", "x x\n", `{"path":"f","old_text":"x","new_text":"y"}`, "x x\n", "appears 2 times"},
		{"replace all", "x x\n", `{"path":"f","old_text":"x","new_text":"y","replace_all":true}`, "y y\n", ""},
		{"expected count ok", "x x x\n", `{"path":"f","old_text":"x","new_text":"y","expected_replacements":3}`, "y y y\n", ""},
		{"expected count wrong", "x x x\n", `{"path":"f","old_text":"x","new_text":"y","expected_replacements":2}`, "x x x\n", "expected_replacements is 2"},
		{"crlf kept", "one\r\ntwo\r\n", `{"path":"f","old_text":"one\ntwo","new_text":"1\n2"}`, "1\r\n2\r\n", ""},
		{"whitespace-tolerant", "func f() {\n\treturn 1\n}\n", `{"path":"f","old_text":"    return 1\n}","new_text":"\treturn 2\n}"}`, "func f() {\n\treturn 2\n}\n", ""},
		{"empty old_text", "a\n", `{"path":"f","old_text":"","new_text":"b"}`, "a\n", `argument "old_text": must be at least 1 characters long`},
		// One character made 128 times over: the result would be 32 MB,
		// past what edit_file writes (16 MB of one character and a
		// 1,000-character new_text would be 16 GB, built in memory).
		{"result too large", strings.Repeat("a", 256<<10), `{"path":"f","old_text":"a","new_text":"` + strings.Repeat("b", 128) + `","replace_all":true}`,
			strings.Repeat("a", 256<<10), "more than the"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := toolstest.Workspace(t)
			toolstest.WriteFile(t, ws, "f", tt.content)
			_, err := toolstest.Run(t, files.EditFile(), ws, tt.args)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("edit: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("edit: %v, want %q", err, tt.err)
			}
			if got := toolstest.ReadFile(t, ws, "f"); got != tt.want {
				t.Errorf("file = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestListDir(t *testing.T) {
	ws := toolstest.Workspace(t)
	toolstest.WriteFile(t, ws, "b.txt", "")
	toolstest.WriteFile(t, ws, "a/one.go", "")
	toolstest.WriteFile(t, ws, "a/two/three.go", "")
	toolstest.WriteFile(t, ws, ".git/HEAD", "")
	toolstest.WriteFile(t, ws, "node_modules/x/index.js", "")
	must(t, os.Symlink("b.txt", filepath.Join(ws.Dir(), "link")))

	res, err := toolstest.Run(t, files.ListDir(), ws, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := ".git/\na/\nb.txt\nlink@\nnode_modules/"; res.Text != want {
		t.Errorf("list_dir = %q, want %q", res.Text, want)
	}
	res, err = toolstest.Run(t, files.ListDir(), ws, `{"path":"a","recursive":true}`)
	if err != nil || res.Text != "one.go\ntwo/\ntwo/three.go" {
		t.Errorf("recursive = %q, %v", res.Text, err)
	}
	res, err = toolstest.Run(t, files.ListDir(), ws, `{"recursive":true,"max_entries":2}`)
	if err != nil || !strings.Contains(res.Text, "showing 2 of 6 entries") || strings.Contains(res.Text, "node_modules/x") {
		t.Errorf("capped = %q, %v", res.Text, err)
	}
	if _, err := toolstest.Run(t, files.ListDir(), ws, `{"path":"b.txt"}`); !errors.Is(err, sandbox.ErrNotDirectory) {
		t.Errorf("list a file: %v", err)
	}
	if _, err := toolstest.Run(t, files.ListDir(), ws, `{"path":".."}`); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
		t.Errorf("list ..: %v", err)
	}
	toolstest.WriteFile(t, ws, "empty/.keep", "")
	os.Remove(filepath.Join(ws.Dir(), "empty/.keep"))
	if res, _ := toolstest.Run(t, files.ListDir(), ws, `{"path":"empty"}`); res.Text != "Directory empty is empty" {
		t.Errorf("empty = %q", res.Text)
	}
}

func TestGlob(t *testing.T) {
	ws := toolstest.Workspace(t)
	now := time.Now()
	for i, p := range []string{"old.go", "src/mid.go", "src/deep/new.go", "src/readme.md", "node_modules/skip.go"} {
		toolstest.WriteFile(t, ws, p, "")
		mt := now.Add(time.Duration(i) * time.Minute)
		must(t, os.Chtimes(filepath.Join(ws.Dir(), p), mt, mt))
	}
	tests := []struct{ args, want string }{
		{`{"pattern":"*.go"}`, "src/deep/new.go\nsrc/mid.go\nold.go"},
		{`{"pattern":"**/*.go"}`, "src/deep/new.go\nsrc/mid.go\nold.go"},
		{`{"pattern":"src/*.go"}`, "src/mid.go"},
		{`{"pattern":"*.go","path":"src/deep"}`, "src/deep/new.go"},
		{`{"pattern":"**/*.go","max_results":1}`, "src/deep/new.go\n\n(showing the 1 newest of 3 matches)"},
		{`{"pattern":"*.rs"}`, `No files match "*.rs" in the workspace`},
	}
	for _, tt := range tests {
		res, err := toolstest.Run(t, files.Glob(), ws, tt.args)
		if err != nil || res.Text != tt.want {
			t.Errorf("glob %s = %q, %v; want %q", tt.args, res.Text, err, tt.want)
		}
	}
	if _, err := toolstest.Run(t, files.Glob(), ws, `{"pattern":"[a"}`); !errors.Is(err, toolschema.ErrInvalidArguments) {
		t.Errorf("bad pattern: %v", err)
	}
}

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"*.go", "a/b/c.go", true},
		{"**/*.go", "c.go", true},
		{"**/*.go", "a/b/c.go", true},
		{"a/**/c.go", "a/c.go", true},
		{"a/**/c.go", "a/x/y/c.go", true},
		{"a/*/c.go", "a/x/y/c.go", false},
		{"src/*.ts", "src/a.go", false},
		{"**/**/**/**/**/**/**/**/**/**/**/**/**/x", strings.Repeat("a/", 30) + "y", false},
		// "**" apart: exponential without memory of what failed (ten of
		// them against 40 levels took 21 s, twenty would not end).
		{strings.Repeat("**/a/", 20) + "b", strings.Repeat("a/", 40) + "a", false},
		{strings.Repeat("**/a/", 20) + "a", strings.Repeat("a/", 40) + "a", true},
		{strings.Repeat("**/a/", 20) + "a", strings.Repeat("a/", 19) + "a", false},
	}
	for _, tt := range tests {
		if got := files.MatchGlob(tt.pattern, tt.path); got != tt.want {
			t.Errorf("MatchGlob(%q, %q) = %v", tt.pattern, tt.path, got)
		}
	}
}

func TestGrep(t *testing.T) {
	ws := toolstest.Workspace(t)
	toolstest.WriteFile(t, ws, "a.go", "package a\nfunc Hello() {}\n// hello again\n")
	toolstest.WriteFile(t, ws, "sub/b.go", "package b\nvar x = Hello\n")
	toolstest.WriteFile(t, ws, "sub/c.txt", "Hello text\n")
	toolstest.WriteFile(t, ws, ".git/objects/x", "Hello\n")
	toolstest.WriteFile(t, ws, "node_modules/m/i.js", "Hello\n")
	toolstest.WriteFile(t, ws, "bin.dat", "Hello\x00\x01\x02")
	tests := []struct{ args, want string }{
		{`{"pattern":"Hello"}`, "a.go:2: func Hello() {}\nsub/b.go:2: var x = Hello\nsub/c.txt:1: Hello text"},
		{`{"pattern":"hello","case_insensitive":true,"output_mode":"count"}`, "a.go: 2\nsub/b.go: 1\nsub/c.txt: 1"},
		{`{"pattern":"Hello","output_mode":"files_with_matches","glob":"*.go"}`, "a.go\nsub/b.go"},
		{`{"pattern":"Hello","path":"sub/b.go"}`, "sub/b.go:2: var x = Hello"},
		{`{"pattern":"Hello()","fixed_strings":true}`, "a.go:2: func Hello() {}"},
		{`{"pattern":"func","context":1}`, "a.go:1- package a\na.go:2: func Hello() {}\na.go:3- // hello again"},
		{`{"pattern":"Hello","head_limit":1}`, "a.go:2: func Hello() {}\n\n(results cut at head_limit=1; narrow the pattern, path or glob)"},
		{`{"pattern":"nothing-here"}`, `No matches for "nothing-here" in the workspace`},
	}
	for _, tt := range tests {
		res, err := toolstest.Run(t, files.Grep(), ws, tt.args)
		if err != nil || res.Text != tt.want {
			t.Errorf("grep %s =\n%s\n(%v); want\n%s", tt.args, res.Text, err, tt.want)
		}
	}
	for _, tt := range []struct {
		args string
		want error
	}{
		{`{"pattern":"("}`, toolschema.ErrInvalidArguments},
		{`{"pattern":"x","output_mode":"lines"}`, toolschema.ErrInvalidArguments},
		{`{"pattern":"x","path":"/etc"}`, sandbox.ErrOutsideWorkspace},
	} {
		if _, err := toolstest.Run(t, files.Grep(), ws, tt.args); !errors.Is(err, tt.want) {
			t.Errorf("grep %s: %v, want %v", tt.args, err, tt.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestGrepFileGrowingWhileRead: a file under the size limit when grep
// opens it and extended while grep reads it (another session's command
// appending, or a sparse extension that costs no quota) is not read past
// MaxGrepFileBytes. The extension is made as soon as grep first reads the
// file (inotify), far beyond the limit, with the match at its end.
func TestGrepFileGrowingWhileRead(t *testing.T) {
	ws := toolstest.Workspace(t)
	line := "filler line without the word\n"
	toolstest.WriteFile(t, ws, "grow.txt", strings.Repeat(line, (files.MaxGrepFileBytes-1)/len(line)))
	p := filepath.Join(ws.Dir(), "grow.txt")
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	must(t, err)
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, p, unix.IN_ACCESS); err != nil {
		t.Fatal(err)
	}
	grown := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		if _, err := unix.Read(in, buf); err != nil { // grep's first read
			grown <- err
			return
		}
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			grown <- err
			return
		}
		_, err = f.WriteAt([]byte("\nneedle\n"), 8*files.MaxGrepFileBytes)
		grown <- errors.Join(err, f.Close())
	}()
	res, err := toolstest.Run(t, files.Grep(), ws, `{"pattern":"needle","output_mode":"count"}`)
	select {
	case gerr := <-grown:
		must(t, gerr)
	case <-time.After(30 * time.Second):
		t.Fatal("grep never read the file")
	}
	if err != nil || strings.Contains(res.Text, "grow.txt") {
		t.Fatalf("grep = %q, %v; want the file read no further than %d bytes", res.Text, err, files.MaxGrepFileBytes)
	}
}

// TestEditLongOldTextOfEqualLines: an old_text of 40,000 blank lines and
// a line the file lacks, against a file of 400,000 blank lines, is found
// missing at once; the whitespace-tolerant search, window by window, was
// still comparing after 20 s (100,000 by 10,000 lines took 3.5 s), and
// nothing stops it.
func TestEditLongOldTextOfEqualLines(t *testing.T) {
	ws := toolstest.Workspace(t)
	toolstest.WriteFile(t, ws, "blank.txt", strings.Repeat("\n", 400_000))
	args := `{"path":"blank.txt","old_text":"` + strings.Repeat(`\n`, 40_000) + `x","new_text":"y"}`
	if _, err := toolstest.RunWithin(t, 20*time.Second, files.EditFile(), ws, args); !errors.Is(err, files.ErrNoMatch) {
		t.Fatalf("err = %v, want ErrNoMatch", err)
	}
}

// TestReadFileEndsWithItsContext: read_file reads a whole file to count
// its lines, up to a gigabyte; a call whose context has ended stops.
func TestReadFileEndsWithItsContext(t *testing.T) {
	ws := toolstest.Workspace(t)
	toolstest.WriteFile(t, ws, "long.txt", strings.Repeat("x\n", 10000))
	tool := files.ReadFile()
	schema, err := toolschema.Compile(tool.Definition().Parameters)
	if err != nil {
		t.Fatal(err)
	}
	args, err := schema.Parse(`{"path":"long.txt"}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := tool.Run(ctx, &tools.Call{ID: "c", SessionKey: "test:1", Args: args, Workspace: ws}); !errors.Is(err, context.Canceled) {
		t.Errorf("read_file with an ended context: %v, want context.Canceled", err)
	}
}
