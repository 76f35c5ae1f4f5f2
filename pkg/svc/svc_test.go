package svc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
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

// TestLayoutRulesAreTheFiles: the layout a config file asks for is valid
// exactly when the file's nats section is, and both name the same keys
// (one set of rules, config.LayoutLimits.Check, for the file and for a layout
// built in code).
func TestLayoutRulesAreTheFiles(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*config.NATS)
		want string // the nats keys named, space-separated; "": valid
	}{
		{"defaults", func(*config.NATS) {}, ""},
		{"windows at the floor", func(n *config.NATS) { n.DuplicateWindowSeconds, n.ReplayWindowSeconds = 60, 60 }, ""},
		{"three replicas", func(n *config.NATS) { n.Replicas = 3 }, ""},
		{"six replicas", func(n *config.NATS) { n.Replicas = 6 }, "nats.replicas"},
		{"no lease TTL", func(n *config.NATS) { n.LeaseTTLSeconds = 0 }, "nats.leaseTtlSeconds"},
		{"lease TTL over an hour", func(n *config.NATS) { n.LeaseTTLSeconds, n.ReplayWindowSeconds = 3601, 7202 }, "nats.leaseTtlSeconds"},
		{"duplicate window within a publish's resends", func(n *config.NATS) { n.DuplicateWindowSeconds = 30 }, "nats.duplicateWindowSeconds"},
		{"duplicate window over a day", func(n *config.NATS) { n.DuplicateWindowSeconds = 86401 }, "nats.duplicateWindowSeconds"},
		{"replay window under two lease TTLs", func(n *config.NATS) { n.LeaseTTLSeconds = 90 }, "nats.replayWindowSeconds"},
		{"replay window over a day", func(n *config.NATS) { n.ReplayWindowSeconds = 86401 }, "nats.replayWindowSeconds"},
		{"every key", func(n *config.NATS) { *n = config.NATS{} }, "nats.replicas nats.leaseTtlSeconds nats.duplicateWindowSeconds nats.replayWindowSeconds"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := config.Defaults()
			tt.edit(&file.NATS)
			want := strings.Fields(tt.want)
			if got := natsKeys(file.Validate()); !slices.Equal(got, want) {
				t.Errorf("the file's Validate names %q, want %q", got, want)
			}
			if got := natsKeys(Layout(file).Validate()); !slices.Equal(got, want) {
				t.Errorf("its layout's Validate names %q, want %q", got, want)
			}
		})
	}
}

// natsKeys lists the nats keys err names, in the order the rules check
// them.
func natsKeys(err error) []string {
	var keys []string
	for _, key := range []string{"nats.replicas", "nats.leaseTtlSeconds", "nats.duplicateWindowSeconds", "nats.replayWindowSeconds"} {
		if strings.Contains(fmt.Sprint(err), key+":") {
			keys = append(keys, key)
		}
	}
	return keys
}
