package procgroup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/nanofleet/internal/procgroup"
)

// start runs script with /bin/sh, killed at the end of the test.
func start(t *testing.T, env []string, script string) *procgroup.Proc {
	t.Helper()
	p, err := procgroup.Start("sh", "/bin/sh", env, 1<<10, "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

func TestKillEndsTheGroup(t *testing.T) {
	// The shell starts a sleep of its own: killing the group ends both,
	// and the shell's output is kept.
	p := start(t, nil, "echo ready; sleep 60 & wait")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := p.WaitPrinted(ctx, "ready"); err != nil {
		t.Fatalf("WaitPrinted = %v; output %q", err, p.Output())
	}
	go p.Kill()
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("not exited 10s after Kill: the sleep holds its output open")
	}
}

func TestWaitPrinted(t *testing.T) {
	tests := []struct {
		name, script string
		wait         time.Duration
		want         error
	}{
		{"the process exits first", "exit 3", 10 * time.Second, procgroup.ErrExited},
		{"ctx ends first", "sleep 60", 50 * time.Millisecond, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, nil, tt.script)
			ctx, cancel := context.WithTimeout(t.Context(), tt.wait)
			defer cancel()
			if err := p.WaitPrinted(ctx, "never"); !errors.Is(err, tt.want) {
				t.Fatalf("WaitPrinted = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestEnvIsAdded(t *testing.T) {
	p := start(t, []string{"CODE=3"}, "exit $CODE")
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("not exited")
	}
	if got := p.ExitCode(); got != 3 {
		t.Errorf("ExitCode = %d, want 3, from the env given", got)
	}
}
