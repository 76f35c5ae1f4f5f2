// Package workertest plays the agent worker's part in the channel tests: it
// takes inbound messages from the fleet's inbound stream with a JetStream
// consumer and answers each as a script says, publishing live messages on
// core NATS and durable replies on the outbound stream, the way the real
// worker does (replies carry the inbound message's metadata, reply_to and
// session key, and deterministic ids).
package workertest

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Script answers one inbound message. Replies with kind PROGRESS,
// TOOL_HINT or DELTA go to the live subject, the others to the outbound
// stream; empty fields are filled in from the inbound message.
type Script func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage

// Echo answers every message with a final "echo: <content>".
func Echo(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
	return []*nanofleetv1.OutboundMessage{Final("echo: " + in.GetContent())}
}

// Final is a final answer.
func Final(text string) *nanofleetv1.OutboundMessage {
	return &nanofleetv1.OutboundMessage{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, Content: text}
}

// WithMedia answers every message with a final text carrying refs, the
// attachments a tool left in the object store (see [StoreMedia]).
func WithMedia(text string, refs ...*nanofleetv1.MediaRef) Script {
	return func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		m := Final(text)
		m.Media = refs
		return []*nanofleetv1.OutboundMessage{m}
	}
}

// Streamed answers every message with deltas, as a model streaming its
// answer, then the final text.
func Streamed(final string, deltas ...string) Script {
	return func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		var out []*nanofleetv1.OutboundMessage
		for _, d := range deltas {
			out = append(out, Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, d))
		}
		return append(out, Final(final))
	}
}

// AfterHint answers every message with a tool hint, as a model calling a
// tool shows it, then the final text.
func AfterHint(hint, final string) Script {
	return func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT, hint), Final(final)}
	}
}

// StoreMedia puts data[i] in b's object store under refs[i]'s object; a
// nil data[i] stores nothing, for an attachment gone from the store.
func StoreMedia(t testing.TB, b *bus.Bus, refs []*nanofleetv1.MediaRef, data [][]byte) {
	t.Helper()
	blobs, err := b.Blobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range data {
		if d == nil {
			continue
		}
		if _, err := blobs.PutBytes(t.Context(), refs[i].GetObject(), d); err != nil {
			t.Fatal(err)
		}
	}
}

// Deltas cuts text before each space, as a model streams an answer word
// by word: the pieces join back to text.
func Deltas(text string) []string {
	words := strings.Split(text, " ")
	for i := 1; i < len(words); i++ {
		words[i] = " " + words[i]
	}
	return words
}

// Live is a live message of kind k.
func Live(k nanofleetv1.OutboundKind, text string) *nanofleetv1.OutboundMessage {
	return &nanofleetv1.OutboundMessage{Kind: k, Content: text}
}

// Worker is a running fake worker.
type Worker struct {
	// Inbound receives every inbound message the worker took.
	Inbound chan *nanofleetv1.InboundMessage

	b       *bus.Bus
	script  Script
	history *session.Store
	before  func(*nanofleetv1.OutboundMessage)
	mu      sync.Mutex
}

// Option configures a worker.
type Option func(*Worker)

// WithHistory makes the worker record each turn in the session store, as
// the real worker commits turns, so that history readers see them.
func WithHistory(s *session.Store) Option { return func(w *Worker) { w.history = s } }

// BeforeDurable calls f before each durable reply is published (after the
// live messages before it), so a test can hold the answer back until it
// has seen the stream.
func BeforeDurable(f func(*nanofleetv1.OutboundMessage)) Option {
	return func(w *Worker) { w.before = f }
}

// HoldUntil holds each durable reply back until release is closed, or
// for at most timeout, so that a test sees what comes before the answer
// (typing, tool hints, a streamed message) before the answer itself.
func HoldUntil(release <-chan struct{}, timeout time.Duration) Option {
	return BeforeDurable(func(*nanofleetv1.OutboundMessage) {
		select {
		case <-release:
		case <-time.After(timeout):
		}
	})
}

// Next returns the next inbound message the worker took, failing the
// test when none comes within 15 s.
func (w *Worker) Next(t testing.TB) *nanofleetv1.InboundMessage {
	t.Helper()
	select {
	case in := <-w.Inbound:
		return in
	case <-time.After(15 * time.Second):
		t.Fatal("workertest: no inbound message within 15s")
		return nil
	}
}

// ContentsUntil returns the contents of the inbound messages the worker
// takes, up to the one with content last, failing the test when a message
// does not come within timeout of the one before.
func (w *Worker) ContentsUntil(t testing.TB, last string, timeout time.Duration) []string {
	t.Helper()
	var got []string
	for {
		select {
		case in := <-w.Inbound:
			got = append(got, in.GetContent())
			if in.GetContent() == last {
				return got
			}
		case <-time.After(timeout):
			t.Fatalf("workertest: worker never got %q (got %q)", last, got)
		}
	}
}

// Start runs a worker until the end of the test.
func Start(t testing.TB, b *bus.Bus, script Script, opts ...Option) *Worker {
	t.Helper()
	w := &Worker{Inbound: make(chan *nanofleetv1.InboundMessage, 100), b: b, script: script}
	for _, o := range opts {
		o(w)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cons, err := b.JS.CreateOrUpdateConsumer(ctx, b.Space.InboundStream(), jetstream.ConsumerConfig{
		Durable:   b.Space.WorkerConsumer(),
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   10 * time.Second,
	})
	if err != nil {
		cancel()
		t.Fatalf("workertest: consumer: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond))
			if err != nil {
				continue
			}
			for m := range batch.Messages() {
				if err := w.handle(ctx, m); err != nil && ctx.Err() == nil {
					t.Errorf("workertest: %v", err)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *Worker) handle(ctx context.Context, m jetstream.Msg) error {
	meta, err := m.Metadata()
	if err != nil {
		return err
	}
	in := &nanofleetv1.InboundMessage{}
	if err := proto.Unmarshal(m.Data(), in); err != nil {
		return fmt.Errorf("decode inbound: %w", err)
	}
	select {
	case w.Inbound <- in:
	default:
	}
	key := in.GetSessionKey()
	if key == "" {
		key = in.GetChannel() + ":" + in.GetChatId()
	}
	replies := w.script(in)
	var final string
	streamed := false
	for i, out := range replies {
		fill(out, in, key, meta.Sequence.Stream, i)
		switch out.GetKind() {
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA:
			streamed = true
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL:
			final = out.GetContent()
			if streamed {
				// As the real worker: a gateway that has not seen the
				// deltas yet waits for the stream's owner instead of
				// sending the answer whole beside the streamed message.
				out.Metadata = maps.Clone(out.Metadata)
				if out.Metadata == nil {
					out.Metadata = map[string]string{}
				}
				out.Metadata[metakey.Streamed] = "true"
			}
		}
		data, err := proto.Marshal(out)
		if err != nil {
			return err
		}
		switch out.GetKind() {
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT, nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA:
			if err := w.b.NC.Publish(w.b.Space.Live(out.GetChannel(), out.GetChatId()), data); err != nil {
				return err
			}
			continue
		}
		if w.before != nil {
			w.before(out)
		}
		if w.history != nil && out.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
			if err := w.commit(ctx, key, in, meta.Sequence.Stream, final); err != nil {
				return err
			}
		}
		msg := nats.NewMsg(w.b.Space.Outbound(out.GetChannel(), out.GetChatId()))
		msg.Data = data
		msg.Header.Set(nats.MsgIdHdr, out.GetId())
		if _, err := w.b.JS.PublishMsg(ctx, msg); err != nil {
			return fmt.Errorf("publish reply: %w", err)
		}
	}
	return m.Ack()
}

func fill(out *nanofleetv1.OutboundMessage, in *nanofleetv1.InboundMessage, key string, seq uint64, n int) {
	if out.Id == "" {
		out.Id = fmt.Sprintf("%d:%d", seq, n)
	}
	if out.Channel == "" {
		out.Channel = in.GetChannel()
	}
	if out.ChatId == "" {
		out.ChatId = in.GetChatId()
	}
	if out.ReplyTo == "" {
		out.ReplyTo = in.GetId()
	}
	if out.SessionKey == "" {
		out.SessionKey = key
	}
	if out.Metadata == nil && len(in.GetMetadata()) > 0 {
		out.Metadata = map[string]string{}
		for k, v := range in.GetMetadata() {
			out.Metadata[k] = v
		}
	}
	out.CreatedAt = timestamppb.Now()
}

func (w *Worker) commit(ctx context.Context, key string, in *nanofleetv1.InboundMessage, seq uint64, final string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, err := w.history.LoadHistory(ctx, key, 0)
	if err != nil {
		return err
	}
	rec := &nanofleetv1.TurnRecord{
		TurnId: fmt.Sprintf("turn-%d", seq), InboundId: in.GetId(), InboundSeq: seq, SessionKey: key,
		Messages: []*nanofleetv1.ChatMessage{
			{Role: "user", Content: in.GetContent(), Media: in.GetMedia()},
			{Role: "assistant", Content: final},
		},
		CompletedAt: timestamppb.Now(),
	}
	_, err = w.history.Append(ctx, key, rec, h.LastSeq)
	return err
}
