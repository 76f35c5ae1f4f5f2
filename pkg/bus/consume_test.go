package bus_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// TestConsumeOutboundDeadLettersUndecodable: a reply that does not decode
// is dead-lettered with the reason, never reaches the handler and is not
// redelivered; the next good reply is handled.
func TestConsumeOutboundDeadLettersUndecodable(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx, cancel := context.WithCancel(t.Context())
	handled := make(chan *nanofleetv1.OutboundMessage, 10)
	done := make(chan error, 1)
	go func() {
		done <- b.ConsumeOutbound(ctx, "test_replies", "test", "internal",
			func(_ context.Context, m jetstream.Msg, out *nanofleetv1.OutboundMessage) {
				_ = m.Ack()
				handled <- out
			}, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := bustest.Receive(t, done, 10*time.Second); err != nil {
			t.Errorf("ConsumeOutbound: %v", err)
		}
	})
	subj := b.Space.Outbound("internal", "c1")
	for _, tt := range bustest.Malformed {
		t.Run(tt.Name, func(t *testing.T) {
			bustest.Publish(t, b, subj, tt.Data)
			good, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Id: tt.Name, Content: "ok"})
			bustest.Publish(t, b, subj, good)
			// The consumer hands messages over one at a time in stream
			// order: once the good one is handled, the bad one is done.
			if out := bustest.Receive(t, handled, 10*time.Second); out.GetId() != tt.Name {
				t.Fatalf("handled %q, want the good reply %q", out.GetId(), tt.Name)
			}
			bustest.WantDeadLetter(t, b, "outbound", subj, tt.Data, "decode outbound message: ")
		})
	}
	cons, err := b.JS.Consumer(t.Context(), b.Space.OutboundStream(), "test_replies")
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 5*time.Second, func() error {
		info, err := cons.Info(t.Context())
		if err == nil && (info.NumAckPending != 0 || info.NumRedelivered != 0 || info.NumPending != 0) {
			return fmt.Errorf("consumer still holds messages: %+v", info)
		}
		return err
	})
}
