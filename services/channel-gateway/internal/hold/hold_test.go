package hold_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/hold"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

const wait = 10 * time.Second

// run starts hold.Run in the background and returns its result channel.
func run(ctx context.Context, b *bus.Bus, key string, work func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- hold.Run(ctx, b, key, slog.New(slog.DiscardHandler), work) }()
	return done
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("no %s within %s", what, wait)
		var zero T
		return zero
	}
}

func TestOneHolderAtATime(t *testing.T) {
	b := bustest.StartJetStream(t, status.Assets) // lease TTL 3s
	key := hold.Key("test", "account-1")
	started := make(chan string, 2)
	work := func(name string) func(context.Context) error {
		return func(ctx context.Context) error {
			started <- name
			<-ctx.Done()
			return nil
		}
	}
	ctxA, stopA := context.WithCancel(t.Context())
	doneA := run(ctxA, b, key, work("a"))
	if got := recv(t, started, "first holder"); got != "a" {
		t.Fatalf("%s started first", got)
	}
	run(t.Context(), b, key, work("b"))
	select {
	case got := <-started:
		t.Fatalf("%s started while a held the lease", got)
	case <-time.After(2 * time.Second): // most of a TTL: b must keep waiting
	}
	stopA()
	if err := recv(t, doneA, "end of a"); err != nil {
		t.Errorf("a: %v", err)
	}
	if got := recv(t, started, "takeover"); got != "b" {
		t.Errorf("%s took over", got)
	}
}

func TestLostLeaseCancelsWork(t *testing.T) {
	b := bustest.StartJetStream(t, status.Assets)
	key := hold.Key("test", "account-2")
	kv, err := b.KV(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	started, cancelled := make(chan struct{}, 4), make(chan struct{}, 4)
	run(t.Context(), b, key, func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- struct{}{}
		return nil
	})
	recv(t, started, "work")
	// Someone else takes the lease over (as after a pause past the TTL).
	if err := kv.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(t.Context(), key, []byte("another gateway")); err != nil {
		t.Fatal(err)
	}
	recv(t, cancelled, "work cancelled after the lease was lost")
}

func TestWorkErrors(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		fatal bool
	}{
		{"transient error starts over", errors.New("connection reset"), false},
		{"fatal error ends Run", &hold.Fatal{Err: errors.New("credentials rejected")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bustest.StartJetStream(t, status.Assets)
			calls := make(chan struct{}, 10)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := run(ctx, b, hold.Key("test", tt.name), func(context.Context) error {
				calls <- struct{}{}
				return tt.err
			})
			recv(t, calls, "first call")
			if tt.fatal {
				if err := recv(t, done, "end of Run"); !errors.Is(err, tt.err) {
					t.Errorf("Run = %v, want %v", err, tt.err)
				}
				return
			}
			recv(t, calls, "second call") // after a one-second pause
			cancel()
			if err := recv(t, done, "end of Run"); err != nil {
				t.Errorf("Run = %v", err)
			}
		})
	}
}

// TestStatusNamesTheAccount: the gateway's record says connected, as
// the account, under the lease, which the gateway holds under its own id.
func TestStatusNamesTheAccount(t *testing.T) {
	b := bustest.StartJetStream(t, status.Assets)
	board, err := status.Open(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	key := hold.Key("test", "token-1")
	held := make(chan struct{})
	done := make(chan error, 1)
	ctx, stop := context.WithCancel(t.Context())
	go func() {
		done <- hold.Run(ctx, b, key, slog.New(slog.DiscardHandler), func(ctx context.Context) error {
			close(held)
			<-ctx.Done()
			return nil
		}, hold.WithAccount("@nano_bot"), hold.WithStatus(board.Reporter("gw-1")))
	}()
	recv(t, held, "lease")
	recs, err := board.Records(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("records = %+v, want the gateway's one", recs)
	}
	if r := recs[0]; r.State != status.Connected || r.Account != "@nano_bot" || r.Lease != key || r.Holder != "gw-1" || r.Gateway != "gw-1" {
		t.Errorf("record = %+v, want connected as @nano_bot under %s, by gw-1", r, key)
	}
	kv, err := b.KV(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	if owner, err := lease.NewTable(kv).Holder(t.Context(), key); err != nil || owner != "gw-1" {
		t.Errorf("lease owner = %q, %v; want the gateway, gw-1", owner, err)
	}
	stop()
	if err := recv(t, done, "end of Run"); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestKeyHidesTheSecret: the keys name an account by 16 hex digits of its
// hash, the same in every release (gateways of two releases exclude each
// other by them).
func TestKeyHidesTheSecret(t *testing.T) {
	if got := hold.Hash("tok"); got != "1a7674eb4ee78df7" {
		t.Errorf("Hash = %s", got)
	}
	if got := hold.Key("discord", "tok"); got != "discord-conn-1a7674eb4ee78df7" {
		t.Errorf("Key = %s", got)
	}
}
