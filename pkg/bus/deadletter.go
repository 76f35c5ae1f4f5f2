package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Letter is a message being dead-lettered.
type Letter struct {
	Subject    string
	Data       []byte
	Header     nats.Header
	StreamSeq  uint64
	Deliveries uint64
	Reason     string
}

// LetterOf is the letter of a JetStream message given up on for reason,
// with its stream sequence and deliveries when m carries them.
func LetterOf(m jetstream.Msg, reason string) Letter {
	l := Letter{Subject: m.Subject(), Data: m.Data(), Header: m.Headers(), Reason: reason}
	if meta, err := m.Metadata(); err == nil {
		l.StreamSeq, l.Deliveries = meta.Sequence.Stream, meta.NumDelivered
	}
	return l
}

// DeadLetter stores l on the dead-letter subject of source with its reason,
// keeping the original bytes so an operator can inspect or replay it.
func (b *Bus) DeadLetter(ctx context.Context, source string, l Letter) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	dl := &nanofleetv1.DeadLetter{
		Subject:    l.Subject,
		Reason:     l.Reason,
		Data:       l.Data,
		Deliveries: l.Deliveries,
		FailedAt:   timestamppb.New(time.Now()),
		StreamSeq:  l.StreamSeq,
	}
	if len(l.Header) > 0 {
		dl.Headers = make(map[string]string, len(l.Header))
		for k := range l.Header {
			dl.Headers[k] = l.Header.Get(k)
		}
	}
	data, err := proto.Marshal(dl)
	if err != nil {
		return fmt.Errorf("encode dead letter: %w", err)
	}
	msg := nats.NewMsg(b.Space.DeadLetter(source))
	msg.Data = data
	msg.Header.Set("Nanofleet-Reason", l.Reason)
	if l.StreamSeq > 0 {
		// One dead letter per original message, however often we retry.
		msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%s:%d", source, l.StreamSeq))
	}
	if _, err := PublishMsg(ctx, b.JS, msg); err != nil {
		return fmt.Errorf("publish dead letter for %s: %w", l.Subject, err)
	}
	return nil
}
