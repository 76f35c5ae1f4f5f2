package svc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/svc"
)

// part is a component for Background: it closes up when asked to, and
// returns its ctx's cause as errStopped or fails early with errEarly.
type part struct {
	ctx     context.Context // the one run got
	up      chan struct{}
	running chan struct{}
	failing bool
}

var (
	errStopped = errors.New("stopped")
	errEarly   = errors.New("failed before it was up")
)

func (p *part) run(ctx context.Context) error {
	p.ctx = ctx
	close(p.running)
	if p.failing {
		return errEarly
	}
	<-ctx.Done()
	return errStopped
}

func TestBackground(t *testing.T) {
	tests := []struct {
		name    string
		failing bool
		goUp    bool
		endSet  bool // setup ends before the part is up
		wantErr error
	}{
		{"up", false, true, false, nil},
		{"fails before up", true, false, false, errEarly},
		{"setup ends first", false, false, true, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &part{up: make(chan struct{}), running: make(chan struct{}), failing: tt.failing}
			setup, endSetup := context.WithCancel(t.Context())
			defer endSetup()
			go func() {
				select {
				case <-p.running:
				case <-time.After(10 * time.Second):
					return
				}
				if tt.goUp {
					close(p.up)
				}
				if tt.endSet {
					endSetup()
				}
			}()
			stop, err := svc.Background(setup, p.run, p.up)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Background: %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if stop != nil {
					t.Error("a stop function after a failed start")
				}
				if p.ctx.Err() == nil {
					t.Error("the part's context is still live after a failed start")
				}
				return
			}
			// The part outlives setup: ending it cancels nothing (context
			// cancellation reaches derived contexts before cancel returns).
			endSetup()
			if err := p.ctx.Err(); err != nil {
				t.Fatalf("setup's end reached the part: %v", err)
			}
			done := make(chan error, 1)
			go func() { done <- stop() }()
			select {
			case err := <-done:
				if !errors.Is(err, errStopped) {
					t.Errorf("stop: %v, want %v", err, errStopped)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("stop did not return within 10s")
			}
			if err := stop(); !errors.Is(err, errStopped) {
				t.Errorf("second stop: %v, want %v again", err, errStopped)
			}
		})
	}
}
