package svc

import (
	"context"
	"sync"
)

// Background runs run in a goroutine on a context of its own, which
// setup's end does not cancel: a part that must outlive the context it was
// started from (the observability server drains after its service's
// context ends; the all-in-one's tool runner serves the turns that finish
// after the fleet's). It returns once up is closed. If run returns
// first, Background returns its error; if setup ends first, it stops run
// and returns setup's error. stop cancels run, waits for it and returns
// what it returned; calling it again returns the same.
func Background(setup context.Context, run func(context.Context) error, up <-chan struct{}) (stop func() error, err error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(setup))
	ran := make(chan error, 1)
	go func() { ran <- run(ctx) }()
	select {
	case <-up:
	case err := <-ran:
		cancel()
		return nil, err
	case <-setup.Done():
		cancel()
		<-ran
		return nil, setup.Err()
	}
	return sync.OnceValue(func() error {
		cancel()
		return <-ran
	}), nil
}
