// Package bustest starts real NATS JetStream servers for tests: embedded in
// the test process, or as a nats-server process built from the module for
// tests that run several processes.
package bustest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/embeddednats"
)

// Server is an embedded JetStream server in a temp dir.
type Server struct {
	*embeddednats.Server
	StoreDir string
}

// StartServer starts an embedded nats-server with JetStream listening on a
// free loopback port, stopped at the end of the test.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return StartServerIn(t, t.TempDir())
}

// StartServerIn is [StartServer] with a given store dir, for restart tests.
func StartServerIn(t testing.TB, dir string) *Server {
	t.Helper()
	e, err := embeddednats.Start(embeddednats.Config{StoreDir: dir, Port: -1})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(e.Shutdown)
	return &Server{Server: e, StoreDir: dir}
}

// Connect connects to s, provisions the fleet's core layout and the
// assets of decls with prefix, and closes the connection at the end of
// the test.
func (s *Server) Connect(t testing.TB, prefix string, decls ...bus.Declare) *bus.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: s.ClientURL(), Prefix: prefix, Name: t.Name()})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { b.NC.Close() })
	if err := bus.Provision(ctx, b, TestLayout(), decls...); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return b
}

// TestLayout is the default layout with a short lease TTL and short-lived
// checkpoint markers.
func TestLayout() bus.Layout {
	l := bus.DefaultLayout()
	l.LeaseTTL = 3 * time.Second
	l.CheckpointMarkerTTL = time.Second
	return l
}

// StartJetStream starts a server and returns a connection to it with the
// default prefix, the core layout and the assets of decls provisioned.
func StartJetStream(t testing.TB, decls ...bus.Declare) *bus.Bus {
	t.Helper()
	return StartServer(t).Connect(t, "", decls...)
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// ServerBinary builds the nats-server binary from the module once per test
// binary and returns its path.
func ServerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nanofleet-nats-server")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "nats-server")
		cmd := exec.Command("go", "build", "-o", buildPath, "github.com/nats-io/nats-server/v2")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("build nats-server: %v", buildErr)
	}
	return buildPath
}

// WaitSubjects waits until stream holds messages on exactly want
// subjects, and fails the test if it does not within the given time.
func WaitSubjects(t testing.TB, stream jetstream.Stream, want uint64, within time.Duration) {
	t.Helper()
	name := stream.CachedInfo().Config.Name
	Eventually(t, within, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), bus.RequestTry)
		defer cancel()
		info, err := stream.Info(ctx)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		if info.State.NumSubjects != want {
			return fmt.Errorf("stream %s holds %d subjects, want %d", name, info.State.NumSubjects, want)
		}
		return nil
	})
}

// Unanswered takes every message on subjects and never replies, until
// the test ends: a request sent there looks like one taken by a server
// that then died.
func Unanswered(t testing.TB, b *bus.Bus, subjects ...string) {
	t.Helper()
	for _, subj := range subjects {
		sub, err := b.NC.Subscribe(subj, func(*nats.Msg) {})
		if err != nil {
			t.Fatalf("subscribe %s: %v", subj, err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := b.NC.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
}
