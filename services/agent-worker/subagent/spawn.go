package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Tool returns the spawn tool.
func (m *Manager) Tool() agenttool.Tool { return spawnTool{m} }

type spawnTool struct{ m *Manager }

func (spawnTool) Tool() toolschema.Tool {
	return toolschema.Tool{
		Name: "spawn",
		Description: "Spawn a subagent to handle a task in the background. Use it for complex or time-consuming tasks that can run " +
			"independently. The subagent has file, shell and web tools but not this conversation; give it everything it needs in task. " +
			"Without wait, you get control back at once and the result is reported in this chat when done. " +
			"With wait=true, this call returns the subagent's result.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"task":{"type":"string","minLength":1,"description":"The task for the subagent to complete"},
			"label":{"type":"string","description":"Optional short label for the task (for display)"},
			"wait":{"type":"boolean","description":"Wait for the result and return it (default false)"}},
			"required":["task"]}`),
	}
}

func (t spawnTool) Call(ctx context.Context, tc *agenttool.TurnContext, args map[string]any) (string, error) {
	m := t.m
	if IsChild(tc.Inbound) {
		return "", ErrNested
	}
	task, _ := args["task"].(string)
	task = strings.TrimSpace(task)
	if task == "" {
		return "", fmt.Errorf("%w: task is required", toolschema.ErrInvalidArguments)
	}
	label, _ := args["label"].(string)
	label = strings.TrimSpace(label)
	if label == "" {
		label = textcut.Line(task, 30)
	}
	wait, _ := args["wait"].(bool)
	parent := tc.SessionKey
	id := bus.StableID(parent, tc.TurnID, task, label)
	key := recordKey(parent, id)

	// Reading the records and starting the child are a few requests,
	// bounded so that one lost with a server that died fails the call
	// instead of holding the turn; waiting for the result has its own
	// bound (WaitTimeout).
	sctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
	defer cancel()
	rec, _, err := m.get(sctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		// A turn resumed after a crash may call spawn again: its child
		// may be running (the record is found) or done already.
		if done, err := m.finished(sctx, parent, id); err != nil {
			return "", err
		} else if done != nil {
			return fmt.Sprintf("Subagent [%s] already finished.\n\nResult:\n%s", label, done.GetContent()), nil
		}
		if rec, err = m.start(sctx, tc, key, id, task, label, wait); err != nil {
			return "", err
		}
	case err != nil:
		return "", err
	}
	if !wait {
		return fmt.Sprintf("Subagent [%s] started (id: %s). Its result will be reported in this chat when it completes.", label, id), nil
	}
	return m.await(ctx, key, rec)
}

// start records and publishes a new child.
func (m *Manager) start(ctx context.Context, tc *agenttool.TurnContext, key, id, task, label string, wait bool) (*record, error) {
	parent := tc.SessionKey
	recs, err := m.records(ctx, parent)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, r := range recs {
		if m.running(r) {
			n++
		}
	}
	if n >= m.cfg.MaxPerSession {
		return nil, fmt.Errorf("%w: this conversation already runs %d subagents (the limit); wait for one to finish", ErrLimit, n)
	}
	rec := &record{
		ID: id, Child: childSession(parent, id), Parent: parent, Label: label, Task: task,
		OriginChannel: tc.Inbound.GetChannel(), OriginChat: tc.Inbound.GetChatId(),
		OriginSender: tc.Inbound.GetSenderId(), OriginGroup: memory.IsGroup(tc.Inbound),
		Wait: wait, ParentSeq: tc.InboundSeq, Created: m.now().UTC(),
	}
	// The record comes first: the announcer must find it however fast the
	// child finishes.
	if err := m.put(ctx, key, rec, 0); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("record subagent: %w", err)
	}
	in := &nanofleetv1.InboundMessage{
		Id:         "subagent:" + rec.Child,
		Channel:    Channel,
		ChatId:     childChat(parent, id),
		SessionKey: rec.Child,
		SenderId:   ChildSender(rec.OriginChannel, rec.OriginSender),
		SenderName: parent,
		Kind:       nanofleetv1.InboundKind_INBOUND_KIND_SUBAGENT,
		Content:    taskPrompt(task, label),
		ReceivedAt: timestamppb.New(m.now()),
		Metadata: map[string]string{
			MetaToolset: ToolsetSubagent,
			MetaTools:   strings.Join(m.cfg.Tools, ","),
			MetaID:      id,
			MetaParent:  parent,
			MetaLabel:   label,
		},
	}
	if rec.OriginGroup {
		in.Metadata[metakey.IsGroup] = "true"
	}
	data, err := proto.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode subagent task: %w", err)
	}
	msg := nats.NewMsg(m.b.Space.Inbound(in.GetChannel(), in.GetChatId()))
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, in.GetId())
	ack, err := bus.PublishMsg(ctx, m.b.JS, msg)
	if err != nil {
		_ = m.kv.Delete(context.WithoutCancel(ctx), key)
		return nil, fmt.Errorf("start subagent: %w", err)
	}
	if _, err := m.update(ctx, key, func(r *record) { r.InboundSeq = ack.Sequence }); err != nil {
		m.log.Warn("record subagent inbound sequence", "child", rec.Child, "err", err)
	}
	m.log.Info("subagent started", "child", rec.Child, "label", label, "wait", wait)
	return rec, nil
}

// finished returns the child's final reply if it has one.
func (m *Manager) finished(ctx context.Context, parent, id string) (*nanofleetv1.OutboundMessage, error) {
	msg, err := m.outbound.GetLastMsgForSubject(ctx, m.b.Space.Outbound(Channel, childChat(parent, id)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("subagent %s: %w", id, err)
	}
	out := &nanofleetv1.OutboundMessage{}
	if proto.Unmarshal(msg.Data, out) != nil || !final(out) {
		return nil, nil // not a result: the child has not finished
	}
	return out, nil
}

// await reads the child's replies until its final one.
func (m *Manager) await(ctx context.Context, key string, rec *record) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, m.cfg.WaitTimeout)
	defer cancel()
	out, err := m.result(wctx, rec)
	if err == nil {
		// Delivered here: nothing left to announce.
		if err := m.kv.Delete(context.WithoutCancel(ctx), key); err != nil {
			m.log.Warn("delete subagent record", "child", rec.Child, "err", err)
		}
		if out.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR {
			return "", fmt.Errorf("subagent [%s] failed: %s", rec.Label, out.GetContent())
		}
		return fmt.Sprintf("Subagent [%s] finished.\n\nResult:\n%s", rec.Label, out.GetContent()), nil
	}
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		// The parent's turn goes on; the child's result will be announced.
		if _, uerr := m.update(context.WithoutCancel(ctx), key, func(r *record) { r.Wait = false }); uerr != nil {
			return "", fmt.Errorf("subagent [%s] still running after %s: %w", rec.Label, m.cfg.WaitTimeout, uerr)
		}
		return fmt.Sprintf("Subagent [%s] is still running after %s. Its result will be reported in this chat when it completes.", rec.Label, m.cfg.WaitTimeout), nil
	}
	return "", err
}

// result returns the child's final or error reply, reading its outbound
// subject from the start.
func (m *Manager) result(ctx context.Context, rec *record) (*nanofleetv1.OutboundMessage, error) {
	subj := m.b.Space.Outbound(Channel, childChat(rec.Parent, rec.ID))
	found := make(chan *nanofleetv1.OutboundMessage, 1)
	f, err := m.b.Follow(ctx, m.b.Space.OutboundStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}}, func(msg jetstream.Msg) {
		out := &nanofleetv1.OutboundMessage{}
		if proto.Unmarshal(msg.Data(), out) != nil || !final(out) {
			return
		}
		select {
		case found <- out:
		default:
		}
	}, m.log)
	if err != nil {
		return nil, fmt.Errorf("watch subagent %s: %w", rec.Child, err)
	}
	defer f.Stop(ctx)
	select {
	case out := <-found:
		return out, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func final(out *nanofleetv1.OutboundMessage) bool {
	k := out.GetKind()
	return k == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL || k == nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR
}

// taskPrompt is the child's first message: nanobot's subagent prompt and
// the task.
func taskPrompt(task, label string) string {
	return fmt.Sprintf(`[Subagent task: %s]
You are a subagent spawned by the main agent to complete one task. Stay focused on it: you cannot talk to the user and cannot spawn subagents. When you are done, answer with a clear, concise report of what you did and found; it is passed back to the main agent.

Task: %s`, label, task)
}
