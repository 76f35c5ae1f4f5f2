package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// TestLostReplyDoesNotHoldTheTurn: when the server that took the memory
// read dies before answering, Context fails after the store's call
// timeout, not when the turn's context (minutes) ends. Seen in the chaos
// test: a session stuck behind a turn waiting on its memory.
func TestLostReplyDoesNotHoldTheTurn(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	if err := bus.Provision(ctx, b, bustest.TestLayout(), Assets); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, DefaultConfig(), b)
	if err != nil {
		t.Fatal(err)
	}
	s.callTimeout = 200 * time.Millisecond
	// The bucket's stream goes, and with it the server's answers; the
	// store still sends its reads there, where a subscriber takes them
	// and never answers.
	stream := "KV_" + b.Space.Bucket(bus.BucketMemory)
	if err := b.JS.DeleteStream(ctx, stream); err != nil {
		t.Fatal(err)
	}
	bustest.Unanswered(t, b, "$JS.API.DIRECT.GET."+stream+".>", "$JS.API.STREAM.MSG.GET."+stream)
	// The turn would wait far longer than the store's call timeout.
	turnCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = s.Context(turnCtx, &nanofleetv1.InboundMessage{Channel: "cli", ChatId: "c", Content: "hi"}, "cli:c")
	if err == nil {
		t.Fatal("Context with no answer from the server: no error")
	}
	if turnCtx.Err() != nil {
		t.Fatalf("Context gave up at the turn's deadline (%v), not after its own %s", err, s.callTimeout)
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("Context: %v, want a timeout", err)
	}
}
