package subagent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// AnnounceConsumer is the durable consumer all announcers share.
const AnnounceConsumer = "subagent_announce"

// stopQueue is the queue group of the stop forwarders.
const stopQueue = "subagent_stop"

// Run announces finished children and forwards /stop to children until
// ctx ends. Any number of Runs may run in the fleet: each result and each
// stop is handled by one of them.
func (m *Manager) Run(ctx context.Context) error {
	sub, err := m.b.NC.QueueSubscribe(m.b.Space.StopAll(), stopQueue, func(msg *nats.Msg) { m.onStop(ctx, msg) })
	if err != nil {
		return fmt.Errorf("subagent: subscribe stop: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// A /stop published before the server has the subscription is lost:
	// Listening says when it has. A flush cut short by a lost connection
	// is sent again once it is back (the subscription with it).
	fctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
	err = bus.Retry(fctx, backoff.Backoff{}, func(ctx context.Context) error { return bus.Flush(ctx, m.b.NC) }, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("subagent: subscribe stop: %w", err)
	}
	m.listeningOnce.Do(func() { close(m.listening) })
	err = m.b.ConsumeOutbound(ctx, AnnounceConsumer, "announces finished subagents to their origin chat", Channel,
		m.announce, m.log)
	if err != nil {
		return fmt.Errorf("subagent: %w", err)
	}
	return nil
}

// Listening is closed once a [Manager.Run] of this manager forwards
// /stop requests to children.
func (m *Manager) Listening() <-chan struct{} { return m.listening }

// announce turns a child's final reply into an inbound message of its
// parent session: publish (deduplicated by id), forget the child, ack.
func (m *Manager) announce(ctx context.Context, msg jetstream.Msg, out *nanofleetv1.OutboundMessage) {
	if !final(out) {
		_ = msg.Ack()
		return
	}
	parent, id, ok := parseChildChat(m.b.Space, msg.Subject())
	if !ok {
		_ = msg.Ack()
		return
	}
	key := recordKey(parent, id)
	rec, _, err := m.get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// Delivered by spawn(wait), stopped, or announced already.
		_ = msg.Ack()
		return
	}
	if err != nil {
		m.log.Warn("read subagent record", "key", key, "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	log := m.log.With("child", rec.Child)
	switch {
	case rec.Stopped:
		log.Info("stopped subagent not announced")
	case rec.Wait:
		// spawn(wait) in the parent's turn takes the result.
		_ = msg.Ack()
		return
	default:
		if err := m.publishAnnouncement(ctx, rec, out); err != nil {
			log.Warn("announce subagent", "err", err)
			_ = msg.NakWithDelay(time.Second)
			return
		}
		log.Info("subagent result announced", "origin", rec.OriginChannel+":"+rec.OriginChat)
	}
	if err := m.kv.Delete(ctx, key); err != nil {
		log.Warn("delete subagent record", "err", err)
	}
	_ = msg.Ack()
}

func (m *Manager) publishAnnouncement(ctx context.Context, rec *record, out *nanofleetv1.OutboundMessage) error {
	status := "completed successfully"
	if out.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR {
		status = "failed"
	}
	in := &nanofleetv1.InboundMessage{
		Id:         "subagent:" + rec.Child + ":done",
		Channel:    rec.OriginChannel,
		ChatId:     rec.OriginChat,
		SenderId:   cmp.Or(rec.OriginSender, "subagent"),
		SenderName: rec.Label,
		Kind:       nanofleetv1.InboundKind_INBOUND_KIND_SUBAGENT,
		ReceivedAt: timestamppb.New(m.now()),
		Metadata:   map[string]string{MetaID: rec.ID, MetaLabel: rec.Label},
		Content: fmt.Sprintf(`[Subagent '%s' %s]

Task: %s

Result:
%s

Summarize this naturally for the user. Keep it brief (1-2 sentences). Do not mention technical details like "subagent" or task ids.`,
			rec.Label, status, rec.Task, out.GetContent()),
	}
	if rec.OriginGroup {
		in.Metadata[metakey.IsGroup] = "true"
	}
	if rec.Parent != session.Key(rec.OriginChannel, rec.OriginChat) {
		in.SessionKey = rec.Parent
	}
	data, err := proto.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode announcement: %w", err)
	}
	msg := nats.NewMsg(m.b.Space.Inbound(in.GetChannel(), in.GetChatId()))
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, in.GetId())
	if _, err := bus.PublishMsg(ctx, m.b.JS, msg); err != nil {
		return fmt.Errorf("publish announcement: %w", err)
	}
	return nil
}

// parseChildChat reads parent and id from a child's outbound subject.
func parseChildChat(sp subject.Space, subj string) (parent, id string, ok bool) {
	ch, chat, err := sp.ParseChat(subj)
	i := strings.LastIndexByte(chat, ':')
	if err != nil || ch != Channel || i <= 0 {
		return "", "", false
	}
	return chat[:i], chat[i+1:], true
}

// onStop stops the children of the session a StopRequest names, those
// spawned by turns before the /stop.
func (m *Manager) onStop(ctx context.Context, msg *nats.Msg) {
	req := &nanofleetv1.StopRequest{}
	if err := proto.Unmarshal(msg.Data, req); err != nil || req.GetSessionKey() == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if n, err := m.StopChildren(ctx, req.GetSessionKey(), req.GetBeforeSeq()); err != nil {
		m.log.Warn("stop subagents", "parent", req.GetSessionKey(), "err", err)
	} else if n > 0 {
		m.log.Info("subagents stopped", "parent", req.GetSessionKey(), "count", n)
	}
}

// StopChildren stops every running child of parent spawned by a turn of
// a message before beforeSeq (0: every child), and returns how many it
// stopped. A child's running turn is cancelled by its worker; a child no
// worker has finished is taken off the inbound stream; neither is
// announced.
func (m *Manager) StopChildren(ctx context.Context, parent string, beforeSeq uint64) (int, error) {
	recs, err := m.records(ctx, parent)
	if err != nil {
		return 0, err
	}
	n := 0
	for key, r := range recs {
		if r.Stopped || (beforeSeq > 0 && r.ParentSeq >= beforeSeq) {
			continue
		}
		if _, err := m.update(ctx, key, func(r *record) { r.Stopped = true }); err != nil {
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				continue // finished meanwhile
			}
			return n, err
		}
		data, _ := proto.Marshal(&nanofleetv1.StopRequest{SessionKey: r.Child, RequestedBy: "parent " + parent})
		if err := m.b.NC.Publish(m.b.Space.Stop(r.Child), data); err != nil {
			return n, fmt.Errorf("stop subagent %s: %w", r.Child, err)
		}
		if r.InboundSeq > 0 {
			// Still queued (or running): its message goes, so no worker
			// starts it later. Its record goes with it: nothing to wait for.
			if err := m.inbound.DeleteMsg(ctx, r.InboundSeq); err == nil {
				_ = m.kv.Delete(ctx, key)
			} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
				m.log.Debug("delete subagent task", "child", r.Child, "err", err)
			}
		}
		n++
	}
	return n, nil
}
