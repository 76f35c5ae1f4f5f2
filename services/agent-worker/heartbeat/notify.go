package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Run forwards heartbeat replies that need attention to the user until
// ctx ends.
func (s *Service) Run(ctx context.Context) error {
	err := s.b.ConsumeOutbound(ctx, NotifyConsumer, "forwards heartbeat results that need attention", Channel,
		s.notify, s.log)
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

func (s *Service) notify(ctx context.Context, m jetstream.Msg, out *nanofleetv1.OutboundMessage) {
	switch out.GetKind() {
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE:
	default:
		if out.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR {
			s.log.Warn("heartbeat turn failed", "reply", out.GetContent())
		}
		_ = m.Ack()
		return
	}
	text := strings.TrimSpace(out.GetContent())
	if text == "" || IsOK(text) || text == "⏹ Stopped." {
		s.log.Debug("heartbeat: nothing to report", "turn", out.GetTurnId())
		_ = m.Ack()
		return
	}
	channel, chat, chats, err := s.target(ctx)
	if err != nil {
		s.log.Warn("heartbeat: no chat to notify", "err", err)
		_ = m.NakWithDelay(5 * time.Second)
		return
	}
	switch {
	case chats > 1:
		s.log.Warn("heartbeat: notice dropped: the fleet talks with several chats, so which one is the operator's is not known; set schedule.heartbeat.notifyChannel and notifyChat",
			"chats", chats, "notice", text)
		_ = m.Ack()
		return
	case channel == "":
		s.log.Warn("heartbeat: nobody to notify yet; notice dropped", "notice", text)
		_ = m.Ack()
		return
	}
	note := &nanofleetv1.OutboundMessage{
		Id: "heartbeat:" + out.GetId(), Channel: channel, ChatId: chat, Content: text,
		Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE, SessionKey: session.Key(channel, chat),
		TurnId: out.GetTurnId(), CreatedAt: timestamppb.New(s.now()),
	}
	data, err := proto.Marshal(note)
	if err != nil {
		_ = m.Term()
		return
	}
	msg := nats.NewMsg(s.b.Space.Outbound(channel, chat))
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, note.GetId())
	if _, err := s.b.JS.PublishMsg(ctx, msg); err != nil {
		s.log.Warn("heartbeat: notify", "err", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	s.log.Info("heartbeat notice sent", "to", channel+":"+chat)
	_ = m.Ack()
}

// target is the configured chat, or else the one chat the fleet talks
// with: HEARTBEAT.md is the operator's, and when the fleet has replied to
// several chats (another user, a group) the last of them may be a
// stranger's. chats is how many it replied to, outside its internal
// channels; the target is empty when that is not one.
func (s *Service) target(ctx context.Context) (channel, chat string, chats int, err error) {
	if s.cfg.NotifyChannel != "" {
		return s.cfg.NotifyChannel, s.cfg.NotifyChat, 1, nil
	}
	channel, chat, chats, err = ActiveChats(ctx, s.b, append([]string{Channel, "subagent"}, s.cfg.SkipChannels...))
	if chats != 1 {
		channel, chat = "", ""
	}
	return channel, chat, chats, err
}

// ActiveChats returns the chat the fleet last sent a durable reply to and
// how many chats it sent replies to (as long as the outbound stream keeps
// them), skipping the given channels; "" and 0 when there is none.
func ActiveChats(ctx context.Context, b *bus.Bus, skip []string) (channel, chat string, chats int, err error) {
	cons, err := b.JS.OrderedConsumer(ctx, b.Space.OutboundStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.Space.OutboundAll()},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
		HeadersOnly:    true,
	})
	if err != nil {
		return "", "", 0, fmt.Errorf("scan outbound: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return "", "", 0, fmt.Errorf("scan outbound: %w", err)
	}
	pending := info.NumPending
	var best uint64
	for pending > 0 {
		batch, err := cons.Fetch(int(min(pending, 256)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return "", "", 0, fmt.Errorf("scan outbound: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			pending = meta.NumPending
			ch, ct, err := b.Space.ParseChat(m.Subject())
			if err != nil || slices.Contains(skip, ch) {
				continue
			}
			chats++ // the last message of each subject, so once per chat
			if meta.Sequence.Stream > best {
				best, channel, chat = meta.Sequence.Stream, ch, ct
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return "", "", 0, fmt.Errorf("scan outbound: %w", err)
		}
		if got == 0 {
			break
		}
	}
	return channel, chat, chats, nil
}
