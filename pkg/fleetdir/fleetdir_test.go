package fleetdir_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/fleetdir"
)

// Locks are per open file, so two Acquires in one process conflict as two
// processes would.
func TestAcquireRefusesASecondHolderAndNamesTheFirst(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := fleetdir.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Publish(fleetdir.Info{PID: 42, Command: "run", NATSURL: "nats://127.0.0.1:4222"}); err != nil {
		t.Fatal(err)
	}
	_, err = fleetdir.Acquire(dir)
	var locked *fleetdir.LockedError
	if !errors.As(err, &locked) {
		t.Fatalf("second Acquire = %v, want a LockedError", err)
	}
	for _, want := range []string{dir, "nanofleet run", "pid 42", "nats://127.0.0.1:4222"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	l.Release()
	l2, err := fleetdir.Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

func TestFind(t *testing.T) {
	tests := []struct {
		name    string
		info    *fleetdir.Info // published by the holder; nil: no holder
		wantErr string
		wantURL bool
	}{
		{name: "nobody holds the lock", wantErr: "no fleet runs"},
		{name: "nanofleet run", info: &fleetdir.Info{PID: 7, Command: "run", NATSURL: "nats://127.0.0.1:4333"}, wantURL: true},
		{name: "in-process chat", info: &fleetdir.Info{PID: 8, Command: "chat"}, wantErr: "other processes cannot join"},
		{name: "run still starting", info: &fleetdir.Info{PID: 9, Command: "run"}, wantErr: "still starting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.info != nil {
				l, err := fleetdir.Acquire(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Release()
				if _, err := l.Credentials(); err != nil {
					t.Fatal(err)
				}
				if err := l.Publish(*tt.info); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			r, err := fleetdir.Find(ctx, dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Find = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			u, err := r.URL()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(u, "nats://nanofleet:") || !strings.HasSuffix(u, "@127.0.0.1:4333") {
				t.Fatalf("URL = %q, want the fleet's URL with its credentials", u)
			}
		})
	}
}

func TestFindNotRunningIsErrNotRunning(t *testing.T) {
	_, err := fleetdir.Find(t.Context(), t.TempDir())
	if !errors.Is(err, fleetdir.ErrNotRunning) {
		t.Fatalf("Find on an empty directory = %v, want ErrNotRunning", err)
	}
}

func TestCredentialsAreGeneratedOnceAndPrivate(t *testing.T) {
	dir := t.TempDir()
	l, err := fleetdir.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	c1, err := l.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if c1.User == "" || len(c1.Password) < 32 {
		t.Fatalf("credentials %+v: want a user and a long random password", c1)
	}
	st, err := os.Stat(filepath.Join(dir, "nats-credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Fatalf("credentials file mode %v, want 0600", perm)
	}
	l, err = fleetdir.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	c2, err := l.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	if c1 != c2 {
		t.Fatal("credentials changed across starts; services configured with them would be locked out")
	}
}
