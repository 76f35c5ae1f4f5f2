package proto_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeMatchesProtos regenerates the Go code from the .proto
// files with protoc and the pinned protoc-gen-go and fails if it differs
// from what is committed: run `make proto` after editing a .proto file.
func TestGeneratedCodeMatchesProtos(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("protoc not installed (apt-get install protobuf-compiler); .ci/run installs it")
	}
	tmp := t.TempDir()
	plugin := filepath.Join(tmp, "protoc-gen-go")
	build := exec.Command("go", "build", "-o", plugin, "google.golang.org/protobuf/cmd/protoc-gen-go")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build protoc-gen-go: %v\n%s", err, out)
	}
	var files []string
	for _, pattern := range []string{"nanofleet/v1/*.proto", "feishu/pbbp2/*.proto"} { // the Makefile's PROTOS
		matched, err := filepath.Glob(pattern)
		if err != nil || len(matched) == 0 {
			t.Fatalf("no proto files match %s: %v", pattern, err)
		}
		files = append(files, matched...)
	}
	args := append([]string{"--plugin=protoc-gen-go=" + plugin, "--go_out=" + tmp, "--go_opt=paths=source_relative"}, files...)
	if out, err := exec.Command(protoc, args...).CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
	for _, f := range files {
		gen := f[:len(f)-len(".proto")] + ".pb.go"
		want, err := os.ReadFile(filepath.Join(tmp, gen))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(gen)
		if err != nil {
			t.Fatalf("%s is not committed: run make proto", gen)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s drifted from %s: run make proto", gen, f)
		}
	}
}
