package svc

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/fleetdir"
)

func TestLocalFleet(t *testing.T) {
	running := t.TempDir()
	l, err := fleetdir.Acquire(running)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	creds, err := l.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Publish(fleetdir.Info{PID: 1, Command: "run", NATSURL: "nats://127.0.0.1:4555"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, want string
	}{
		{"a fleet runs there", running, "nats://nanofleet:" + creds.Password + "@127.0.0.1:4555"},
		{"none runs there", t.TempDir(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := localFleet(t.Context(), func(k string) string {
				if k == "NANOFLEET_DATA" {
					return tt.dir
				}
				return ""
			})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("localFleet = %q, want %q", strings.ReplaceAll(got, creds.Password, "<password>"), strings.ReplaceAll(tt.want, creds.Password, "<password>"))
			}
		})
	}
}

// TestLocalFleetStartingEndsWithCtx: an all-in-one that holds its data
// directory but has not said where it listens is waited for only as long
// as the caller's context lasts.
func TestLocalFleetStartingEndsWithCtx(t *testing.T) {
	dir := t.TempDir()
	l, err := fleetdir.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = localFleet(ctx, func(k string) string {
		if k == "NANOFLEET_DATA" {
			return dir
		}
		return ""
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("localFleet = %v, want the caller's context.Canceled", err)
	}
}

// TestHTTPFromConfig: observability.listen sets the observability address
// unless --http is given, an empty --http included.
func TestHTTPFromConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(`{"nats":{"url":"nats://127.0.0.1:1"},"observability":{"listen":"127.0.0.1:9191"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"config", nil, "127.0.0.1:9191"},
		{"flag over config", []string{"--http", "127.0.0.1:9292"}, "127.0.0.1:9292"},
		{"flag turns it off", []string{"--http", ""}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("svc", flag.ContinueOnError)
			var f Flags
			f.Register(fs)
			if err := fs.Parse(append([]string{"--config", cfg}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			if _, err := f.LoadConfig(t.Context()); err != nil {
				t.Fatal(err)
			}
			if f.HTTP != tt.want {
				t.Fatalf("HTTP = %q, want %q", f.HTTP, tt.want)
			}
		})
	}
}

// TestGivenConfigMustExist: a service binary given a config file that is
// not there (--config or NANOFLEET_CONFIG) fails naming it once.
func TestGivenConfigMustExist(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nonexist.json")
	fs := flag.NewFlagSet("svc", flag.ContinueOnError)
	var f Flags
	f.Register(fs)
	if err := fs.Parse([]string{"--config", missing}); err != nil {
		t.Fatal(err)
	}
	_, err := f.LoadConfig(t.Context())
	if want := "config file " + missing + ": no such file or directory"; !errors.Is(err, os.ErrNotExist) || err.Error() != want {
		t.Fatalf("LoadConfig = %v, want %q", err, want)
	}
}
