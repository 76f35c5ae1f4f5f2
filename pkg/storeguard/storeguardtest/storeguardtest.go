// Package storeguardtest makes filesystems fill up for the tests of the
// store guard and of what it guards.
package storeguardtest

import (
	"os"
	"os/exec"
	"testing"
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
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for range 1 << 12 {
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
	t.Fatal("the filesystem did not fill")
}
