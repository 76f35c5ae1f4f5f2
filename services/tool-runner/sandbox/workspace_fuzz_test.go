package sandbox_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// fuzzLayout is a workspace beside a directory holding a secret, with
// symlinks and a hard link that lead out of the workspace, and some that
// stay inside.
type fuzzLayout struct {
	ws      *sandbox.Workspace
	outside string
	secret  []byte
}

func newFuzzLayout(f *testing.F) *fuzzLayout {
	f.Helper()
	base := f.TempDir()
	outside := filepath.Join(base, "outside")
	l := &fuzzLayout{outside: outside, secret: []byte("TOP SECRET")}
	must := func(err error) {
		if err != nil {
			f.Fatal(err)
		}
	}
	must(os.MkdirAll(outside, 0o755))
	must(os.WriteFile(filepath.Join(outside, "secret.txt"), l.secret, 0o600))
	ws, err := sandbox.OpenWorkspace(filepath.Join(base, "ws"))
	must(err)
	f.Cleanup(func() { ws.Close() })
	dir := ws.Dir()
	must(os.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "inside.txt"), []byte("inside"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "sub", "note.md"), []byte("note"), 0o644))
	must(os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "abs-link")))
	must(os.Symlink("../outside/secret.txt", filepath.Join(dir, "rel-link")))
	must(os.Symlink("../outside", filepath.Join(dir, "dir-link")))
	must(os.Symlink("../../outside", filepath.Join(dir, "sub", "up-link")))
	must(os.Symlink("inside.txt", filepath.Join(dir, "in-link")))
	must(os.Symlink("sub", filepath.Join(dir, "sub-link")))
	must(os.Symlink("loop", filepath.Join(dir, "loop")))
	if err := os.Link(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "hard")); err != nil {
		f.Logf("no hard link (%v): that case is not covered", err)
	}
	l.ws = ws
	return l
}

// path turns a fuzzed path into one the workspace sees: "$WS" stands for
// the workspace's absolute directory and "$OUT" for the outside one, so
// that the fuzzer can reach absolute paths of this run's temp dirs.
func (l *fuzzLayout) path(p string) string {
	p = strings.ReplaceAll(p, "$WS", l.ws.Dir())
	return strings.ReplaceAll(p, "$OUT", l.outside)
}

// outsideIntact fails the test if anything outside the workspace changed.
func (l *fuzzLayout) outsideIntact(t *testing.T, p string) {
	t.Helper()
	entries, err := os.ReadDir(l.outside)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"secret.txt"}) {
		t.Fatalf("after access to %q the outside directory holds %v", p, names)
	}
	data, err := os.ReadFile(filepath.Join(l.outside, "secret.txt"))
	if err != nil || !bytes.Equal(data, l.secret) {
		t.Fatalf("after access to %q the outside secret is %q, %v", p, data, err)
	}
}

var pathSeeds = []string{
	"", ".", "notes.md", "./a/../b.txt", "sub/note.md", "sub//deeper/../note.md", "inside.txt", "in-link",
	"sub-link/note.md", "abs-link", "rel-link", "dir-link/secret.txt", "sub/up-link/secret.txt", "hard", "loop",
	"..", "../outside/secret.txt", "a/../../outside/secret.txt", "/etc/passwd", "/proc/self/root/etc/passwd",
	"~", "~/.ssh/id_rsa", "a\x00b", "$WS", "$WS/inside.txt", "$WS/../outside/secret.txt", "$WS/abs-link",
	"$OUT/secret.txt", "$WSx/secret.txt", "sub/\u2024\u2024/x", "dir-link/../ws/inside.txt",
}

// FuzzRel: Rel either refuses with ErrDenied or returns a clean relative
// path that stays under the workspace and that Rel maps to itself.
func FuzzRel(f *testing.F) {
	for _, s := range pathSeeds {
		f.Add(s)
	}
	l := newFuzzLayout(f)
	f.Fuzz(func(t *testing.T, raw string) {
		p := l.path(raw)
		rel, err := l.ws.Rel(p)
		if err != nil {
			if !errors.Is(err, sandbox.ErrDenied) {
				t.Fatalf("Rel(%q): error %v is not ErrDenied", p, err)
			}
			return
		}
		switch {
		case rel == "":
			t.Fatalf("Rel(%q) = empty path", p)
		case filepath.IsAbs(rel):
			t.Fatalf("Rel(%q) = %q: absolute", p, rel)
		case filepath.Clean(rel) != rel:
			t.Fatalf("Rel(%q) = %q: not clean", p, rel)
		case rel == ".." || strings.HasPrefix(rel, "../"):
			t.Fatalf("Rel(%q) = %q: leads out", p, rel)
		}
		host := filepath.Join(l.ws.Dir(), rel)
		if host != l.ws.Dir() && !strings.HasPrefix(host, l.ws.Dir()+"/") {
			t.Fatalf("Rel(%q) = %q: host path %q is outside %q", p, rel, host, l.ws.Dir())
		}
		// "./~" names a file "~" in the workspace, which a bare "~" (the
		// model meaning its home) does not: only those are not fixed points.
		if again, err := l.ws.Rel(rel); !strings.HasPrefix(rel, "~") && (err != nil || again != rel) {
			t.Fatalf("Rel(Rel(%q)) = %q, %v; want %q", p, again, err, rel)
		}
	})
}

// FuzzWorkspaceAccess: whatever path a model gives, reading never returns
// the secret outside the workspace, and writing never changes anything
// outside it; every refusal matches ErrDenied or says why not.
func FuzzWorkspaceAccess(f *testing.F) {
	for _, s := range pathSeeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	l := newFuzzLayout(f)
	f.Fuzz(func(t *testing.T, raw string, write bool) {
		p := l.path(raw)
		if write {
			err := l.ws.WriteFile(p, []byte("fuzz"))
			var pe *sandbox.PathError
			if err != nil && !errors.As(err, &pe) && !errors.Is(err, sandbox.ErrDenied) && !errors.Is(err, os.ErrNotExist) {
				// Other failures (e.g. a name too long) are the file
				// system's; they must not have written anything outside.
				t.Logf("WriteFile(%q): %v", p, err)
			}
			l.outsideIntact(t, p)
			return
		}
		data, err := l.ws.ReadFile(p, 1<<16)
		if err == nil && bytes.Contains(data, l.secret) {
			t.Fatalf("ReadFile(%q) read the secret outside the workspace", p)
		}
		if rel, fi, err := l.ws.Stat(p); err == nil {
			host := filepath.Join(l.ws.Dir(), rel)
			if real, err := filepath.EvalSymlinks(host); err == nil && fi.Mode().IsRegular() &&
				real != l.ws.Dir() && !strings.HasPrefix(real, l.ws.Dir()+"/") && !isHardLinkSeed(rel) {
				t.Fatalf("Stat(%q) succeeded for %q, which resolves outside to %q", p, rel, real)
			}
		}
		l.outsideIntact(t, p)
	})
}

// isHardLinkSeed: the hard link resolves inside by path; Open refuses it.
func isHardLinkSeed(rel string) bool { return rel == "hard" }
