package bus

import (
	"context"
	"errors"
	"fmt"
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

// AckWait is how long one try of [PublishMsg] waits for the ack of a
// message with a Nats-Msg-Id before sending it again. A try lost with
// the server it went through (the client's own, or the stream leader,
// shut down while it was in flight) is never answered; on a 3-node
// loopback cluster such a publish waited out all of [CallTimeout]. An
// ack normally takes milliseconds.
const AckWait = 2 * time.Second

// ResendSpan bounds how long after its first try [PublishMsg] may send a
// message again: [LeaderWait] of refused tries, then [CallTimeout] of
// unanswered ones. A duplicate window shorter than that would store a late
// resend as a second message (see [MinWindow]).
const ResendSpan = LeaderWait + CallTimeout

// codeMsgIDInProcess is JetStream's answer to a message whose
// Nats-Msg-Id a stream is still writing (an earlier try of it).
const codeMsgIDInProcess jetstream.ErrorCode = 10158

// PublishMsg publishes m to JetStream. While no stream answers its
// subject (a stream without a leader: [jetstream.ErrNoStreamResponse]) it
// sends m again, for up to [LeaderWait]. A message with a Nats-Msg-Id
// whose ack does not come within [AckWait] is sent again too, under the
// same id, until [CallTimeout] in all has passed without an answer, so a
// server that takes a message and cannot write it still fails the call;
// a message without one has a single try of [CallTimeout], since sending
// it again could store it twice.
//
// No try stores a second copy: a message is sent again only if no
// stream received it, or under its id, which the stream's duplicate
// window (longer than these bounds) drops. The ack's Duplicate says m was
// stored before this call. When a try of this call went unanswered, the
// stream's duplicate answer to a later try cannot tell that try from an
// earlier call's publish of the same id; it is reported as stored by
// this call (Duplicate false): the unanswered try is by far the likelier,
// and a caller that acts on Duplicate (the API's "same question asked
// again" starts a second turn) would otherwise act on its own message.
//
// opts are the publish's expectations (last sequence and the like). A
// stream checks them before the id on a single server and after it in a
// cluster, so a lost try's resend fails the expectation there (a
// conflict the caller must tell from its own write by reading) and is
// a duplicate here.
func PublishMsg(ctx context.Context, js jetstream.JetStream, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	deadline := time.Now().Add(LeaderWait)
	resend := m.Header.Get(nats.MsgIdHdr) != ""
	var unanswered time.Duration // tries whose ack never came
	for try := 1; ; try++ {
		wait := CallTimeout
		if resend {
			wait = min(AckWait, CallTimeout-unanswered)
		}
		sent := time.Now()
		pctx, cancel := context.WithTimeout(ctx, wait)
		ack, err := js.PublishMsg(pctx, m, opts...)
		cancel()
		switch {
		case err == nil:
			if ack.Duplicate && unanswered > 0 {
				stored := *ack
				stored.Duplicate = false
				return &stored, nil
			}
			return ack, nil
		case ctx.Err() != nil:
			return nil, err
		case errors.Is(err, context.DeadlineExceeded):
			unanswered += time.Since(sent)
			if !resend || unanswered >= CallTimeout {
				return nil, fmt.Errorf("no ack in %s (%d tries): %w", unanswered.Round(time.Millisecond), try, err)
			}
			continue // at once: the try is lost, not refused
		case errors.Is(err, jetstream.ErrNoStreamResponse), inProcess(err):
			if time.Now().After(deadline) {
				return nil, err
			}
		default:
			return nil, err
		}
		if serr := backoff.Sleep(ctx, 250*time.Millisecond); serr != nil {
			return nil, errors.Join(serr, err)
		}
	}
}

// inProcess reports whether err is a stream still writing a message of
// the same id: an earlier try whose outcome is not known yet.
func inProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == codeMsgIDInProcess
}
