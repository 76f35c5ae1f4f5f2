package svc

import (
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
			got, err := localFleet(func(k string) string {
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
