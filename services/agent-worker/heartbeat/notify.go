package heartbeat

import (
	"cmp"
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
	to, chats, err := s.target(ctx)
	if err != nil {
		s.log.Warn("heartbeat: no chat to notify", "err", err)
		_ = m.NakWithDelay(5 * time.Second)
		return
	}
	switch {
	case to.Channel == "" && len(chats) > 0:
		s.log.Warn("heartbeat: notice dropped: the fleet has answered other people's chats, so which one is the operator's is not known; set schedule.heartbeat.notifyChannel and notifyChat",
			"chats", len(chats), "notice", text)
		_ = m.Ack()
		return
	case to.Channel == "":
		s.log.Warn("heartbeat: nobody to notify yet; notice dropped", "notice", text)
		_ = m.Ack()
		return
	}
	channel, chat := to.Channel, to.ID
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
	if _, err := bus.PublishMsg(ctx, s.b.JS, msg); err != nil {
		s.log.Warn("heartbeat: notify", "err", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	s.log.Info("heartbeat notice sent", "to", channel+":"+chat)
	_ = m.Ack()
}

// Chat is a chat of a channel.
type Chat struct{ Channel, ID string }

// target is the configured chat, or else the chat the fleet replies to,
// when it is known to be the operator's: HEARTBEAT.md is the operator's,
// and once the fleet has answered several people the last chat may be a
// stranger's. So it is the one chat the fleet has answered, or the last
// of the operator's own chats (the terminal and the web chat, which only
// the fleet's credentials and login token reach) when it has answered no
// other; else none. chats are the chats the fleet answered (most recent
// first), outside its internal channels.
func (s *Service) target(ctx context.Context) (to Chat, chats []Chat, err error) {
	if s.cfg.NotifyChannel != "" {
		return Chat{s.cfg.NotifyChannel, s.cfg.NotifyChat}, nil, nil
	}
	chats, err = ActiveChats(ctx, s.b, append([]string{Channel, "subagent"}, s.cfg.SkipChannels...))
	if err != nil {
		return Chat{}, nil, err
	}
	return Operators(chats), chats, nil
}

// Operators is the chat of chats (most recent first) that is known to be
// the operator's: the only one, or the latest of the terminal's and web
// chat's when there is no other; else the zero Chat.
func Operators(chats []Chat) Chat {
	var own, others []Chat
	for _, c := range chats {
		if c.Channel == "cli" || c.Channel == "web" {
			own = append(own, c)
		} else {
			others = append(others, c)
		}
	}
	switch {
	case len(others) == 0 && len(own) > 0:
		return own[0]
	case len(others) == 1 && len(own) == 0:
		return others[0]
	}
	return Chat{}
}

// ActiveChats returns the chats the fleet sent durable replies to, as
// long as the outbound stream keeps them, the most recent first, skipping
// the given channels.
func ActiveChats(ctx context.Context, b *bus.Bus, skip []string) ([]Chat, error) {
	stream := b.Space.OutboundStream()
	// One consumer for the whole scan, not an ordered one: nats.go makes
	// an ordered consumer again at each fetch, from the message after the
	// last one fetched, so from the second fetch on (over 256 chats) it
	// delivered every later message, not each chat's last, and listed
	// chats again; and it deleted the one it replaced in the background.
	cons, err := b.JS.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		FilterSubject: b.Space.OutboundAll(),
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:     jetstream.AckNonePolicy,
		HeadersOnly:   true,
		MemoryStorage: true,
		Replicas:      1,
		// Left by a scan whose delete failed, it goes by itself.
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("scan outbound: %w", err)
	}
	// Deleted once scanned: it would otherwise stay on the server for its
	// InactiveThreshold, a client's consumer in `nanofleet status`. A
	// failed delete leaves it to the server.
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bus.RequestTry)
		defer cancel()
		_ = b.DeleteConsumer(ctx, stream, cons)
	}()
	// The create's answer counts what the scan has to read.
	info := cons.CachedInfo()
	type seen struct {
		chat Chat
		seq  uint64
	}
	var all []seen
	for pending := info.NumPending; pending > 0; {
		batch, err := cons.Fetch(int(min(pending, 256)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("scan outbound: %w", err)
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
			all = append(all, seen{Chat{ch, ct}, meta.Sequence.Stream}) // the last message of each subject: once per chat
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("scan outbound: %w", err)
		}
		if got == 0 {
			break
		}
	}
	slices.SortFunc(all, func(a, b seen) int { return cmp.Compare(b.seq, a.seq) })
	chats := make([]Chat, len(all))
	for i, c := range all {
		chats[i] = c.chat
	}
	return chats, nil
}
