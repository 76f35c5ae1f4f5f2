package wsfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/wsfile"
)

// TestCheckWorkspaceRoot: a workspace is written by sessions and, under
// root, given to the sandbox user; the host's own directories and a home
// directory (or a parent of one) must never be one.
func TestCheckWorkspaceRoot(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", filepath.Join(home, "user"))
	if err := os.Mkdir(filepath.Join(home, "user"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "etc-link")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dir  string
		want string // "" when accepted
	}{
		{"/", "system directory"},
		{"/etc", "system directory"},
		{"/etc/", "system directory"},
		{"/usr/../usr/local", "system directory"},
		{"/tmp", "system directory"},
		{link, "system directory"},
		{filepath.Join(home, "user"), "holds the home directory"},
		{home, "holds the home directory"},
		{filepath.Join(home, "user", ".nanofleet", "workspace"), ""},
		{filepath.Join(t.TempDir(), "ws"), ""},
		{"/workspace", ""},
		{"/srv/ws", ""},
	} {
		err := wsfile.CheckWorkspaceRoot(tt.dir)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s refused: %v", tt.dir, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want an error saying %q", tt.dir, err, tt.want)
		}
	}
}
