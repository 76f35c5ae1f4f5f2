package bustest

import (
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Outbound delivers every outbound message of b's fleet, from the start
// of the stream, on a channel that holds up to n (a full channel holds
// the consumer up). stop ends the consumer; the test's end does too.
func Outbound(t testing.TB, b *bus.Bus, n int) (_ <-chan *nanofleetv1.OutboundMessage, stop func()) {
	t.Helper()
	cons, err := b.JS.OrderedConsumer(t.Context(), b.Space.OutboundStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{b.Space.OutboundAll()}})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *nanofleetv1.OutboundMessage, n)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		o := &nanofleetv1.OutboundMessage{}
		if proto.Unmarshal(m.Data(), o) == nil {
			out <- o
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	stop = sync.OnceFunc(cc.Stop)
	t.Cleanup(stop)
	return out, stop
}
