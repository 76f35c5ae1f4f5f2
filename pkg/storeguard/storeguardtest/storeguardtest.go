// Package storeguardtest makes filesystems fill up for the tests of the
// store guard and of what it guards.
package storeguardtest

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// SmallFS mounts a tmpfs of size (as mount takes it: "8m") for the test,
// or skips the test where mounting is not allowed.
func SmallFS(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	// Registered after TempDir's cleanup, so it runs before it.
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// Fill writes path until its filesystem is full (at most 4 GiB).
func Fill(t testing.TB, path string) {
	t.Helper()
	FillTo(t, path, 0)
}

// FillTo writes path until its filesystem has at most leave bytes free
// (at most 4 GiB), in 1 MiB writes: a store short of its reserve, not
// out of space.
func FillTo(t testing.TB, path string, leave int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for range 1 << 12 {
		var st unix.Statfs_t
		if err := unix.Statfs(path, &st); err != nil {
			t.Fatal(err)
		}
		if int64(st.Bavail)*st.Bsize <= leave {
			return
		}
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
	t.Fatal("the filesystem did not fill")
}
