package editstream

import (
	"fmt"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// BenchmarkDeltaAfterManyTurns: a delta on a channel that finished 50,000
// turns in the last ten minutes (100 turns/s for 500 s). Every delta and
// every final passes through one goroutine, so what one costs holds up
// the channel's other chats.
func BenchmarkDeltaAfterManyTurns(b *testing.B) {
	bb := bustest.StartJetStream(b, Assets)
	s, err := New(b.Context(), Config{Channel: "bench", Interval: time.Second, Limit: 4000}, bb, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 50_000 {
		s.end(&nanofleetv1.OutboundMessage{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, ChatId: "c", ReplyTo: fmt.Sprint("in", i), Content: "x"})
	}
	late := &nanofleetv1.OutboundMessage{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, ChatId: "c", ReplyTo: "in1", Content: "late"}
	for b.Loop() { // the timer starts here
		s.delta(b.Context(), late)
	}
}

// BenchmarkEndWithoutStream: what a final answer without a stream leaves
// for ten minutes (every answer of an edit-streaming channel does).
func BenchmarkEndWithoutStream(b *testing.B) {
	bb := bustest.StartJetStream(b, Assets)
	s, err := New(b.Context(), Config{Channel: "bench", Interval: time.Second, Limit: 4000}, bb, nil)
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]*nanofleetv1.OutboundMessage, b.N)
	for i := range msgs {
		msgs[i] = &nanofleetv1.OutboundMessage{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, ChatId: "c", ReplyTo: fmt.Sprint("in", i), Content: "x"}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s.end(msgs[i])
	}
}
