package embeddednats_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/embeddednats"
	"github.com/nanofleet/nanofleet/pkg/syncbuf"
)

// TestEmbeddedRequiresCredentials: a listening embedded server with a
// user and password refuses a client without them or with a wrong
// password, and accepts the right ones over the socket and in-process.
func TestEmbeddedRequiresCredentials(t *testing.T) {
	var logged syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := embeddednats.Start(embeddednats.Config{StoreDir: t.TempDir(), Port: -1, User: "nanofleet", Password: "s3cret"}, embeddednats.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	// The server holds a hash, so it has no plaintext password to warn about.
	if strings.Contains(logged.String(), "Plaintext") {
		t.Errorf("server warned at start: %s", logged.String())
	}
	withUser := func(user, pass string) string {
		u, err := url.Parse(e.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, pass)
		return u.String()
	}
	tests := []struct {
		name    string
		url     string
		extra   []nats.Option
		refused bool
	}{
		{"no credentials", e.ClientURL(), nil, true},
		{"wrong password", withUser("nanofleet", "guess"), nil, true},
		{"credentials in the URL", withUser("nanofleet", "s3cret"), nil, false},
		{"in-process", "", []nats.Option{e.ConnectOption()}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			b, err := bus.Connect(ctx, bus.Config{URL: tt.url, Name: t.Name()}, tt.extra...)
			if tt.refused {
				if err == nil {
					b.NC.Close()
					t.Fatal("connected without the right credentials")
				}
				if !errors.Is(err, nats.ErrAuthorization) {
					t.Fatalf("err = %v, want an authorization error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.NC.Close()
			if _, err := b.JS.AccountInfo(ctx); err != nil {
				t.Fatalf("jetstream after login: %v", err)
			}
		})
	}
}

func TestEmbeddedConfigUserAndPasswordGoTogether(t *testing.T) {
	for _, cfg := range []embeddednats.Config{
		{StoreDir: "x", User: "u"},
		{StoreDir: "x", Password: "p"},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", cfg)
		}
	}
}

// TestStartEmbeddedSaysWhyItCannotStart: a server that cannot start fails
// at once with the reason, instead of waiting out the 30 s readiness
// timeout and saying only that it was not ready.
func TestStartEmbeddedSaysWhyItCannotStart(t *testing.T) {
	taken := bustest.TakenPort(t)
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  embeddednats.Config
		is   error
		want string
	}{
		{"port taken", embeddednats.Config{StoreDir: t.TempDir(), Port: taken.Addr().(*net.TCPAddr).Port}, syscall.EADDRINUSE, "listen tcp 127.0.0.1:"},
		{"store is a file", embeddednats.Config{StoreDir: notADir, Port: -1}, nil, "JetStream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := embeddednats.Start(tt.cfg)
			if err == nil {
				e.Shutdown()
				t.Fatal("started")
			}
			if (tt.is != nil && !errors.Is(err, tt.is)) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want one saying %q (is %v)", err, tt.want, tt.is)
			}
		})
	}
}
