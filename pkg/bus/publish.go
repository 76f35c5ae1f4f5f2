package bus

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

// LeaderWait bounds how long [PublishMsg] waits for a stream without a
// leader to have one again. A node killed under the streams it leads
// leaves them without one until the other replicas notice and elect
// another: nats-server's election timer is 4–9 s, and a 3-node loopback
// cluster answered nobody for 9–10 s after a kill -9.
const LeaderWait = 30 * time.Second

// PublishMsg publishes m to JetStream, and while no stream answers its
// subject (a stream without a leader: [jetstream.ErrNoStreamResponse])
// sends it again, for up to [LeaderWait]. Each try waits [CallTimeout]
// for its ack, so a server that takes a message and cannot write it still
// fails the call. Only a message no stream received is sent again: a
// retry never stores a second copy, and the ack's Duplicate still means
// the message was stored before this call.
func PublishMsg(ctx context.Context, js jetstream.JetStream, m *nats.Msg) (*jetstream.PubAck, error) {
	deadline := time.Now().Add(LeaderWait)
	for {
		pctx, cancel := context.WithTimeout(ctx, CallTimeout)
		ack, err := js.PublishMsg(pctx, m)
		cancel()
		if !errors.Is(err, jetstream.ErrNoStreamResponse) || time.Now().After(deadline) {
			return ack, err
		}
		if serr := backoff.Sleep(ctx, 250*time.Millisecond); serr != nil {
			return nil, errors.Join(serr, err)
		}
	}
}
