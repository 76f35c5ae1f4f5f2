// Package editstream shows an answer while the model writes it, on
// platforms that can edit a sent message (Telegram, Slack, Discord,
// Feishu, DingTalk): the first delta of a turn posts one message at once,
// later deltas edit it at most once per interval, and the final answer
// replaces its text whole.
//
// Fleet-wide: every gateway running the channel follows the channel's
// live subject (deltas) and outbound subject (final answers) itself, so
// each sees a turn's deltas whole and in order; one of them, the first to
// create the turn's entry in the <PREFIX>_streams KV bucket, posts and
// edits. When the final answer appears on the outbound subject, that owner
// makes the final edit and records the outcome in the entry. The gateway
// that delivers the durable final reply asks [Streams.Finish], which waits
// for the outcome (locally, or through the entry when another gateway owns
// the stream).
//
// Guarantees: at most one post or edit per interval per turn, the final
// edit included; the final text is delivered whole exactly once — by the
// final edit, or, when the stream failed (a post or edit error), never
// began, or its owner did not report in time, by the adapter's ordinary
// delivery, which Finish asks for by returning false; the partial message
// is then deleted where the platform allows ([Deleter]). Deltas that
// arrive after the final answer are dropped.
package editstream

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Platform posts and edits messages for the streams.
type Platform interface {
	// Post sends text as a new message in msg's chat (replying to the
	// asking message) and returns the new message's id.
	Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, text string) (id string, err error)
	// Edit replaces the text of message id. final is set for the final
	// answer.
	Edit(ctx context.Context, msg *nanofleetv1.OutboundMessage, id, text string, final bool) error
}

// Deleter is a [Platform] that can delete a message. The partial message
// of a stream whose final edit did not happen is deleted, so that the
// answer sent whole is the only one shown.
type Deleter interface {
	Delete(ctx context.Context, msg *nanofleetv1.OutboundMessage, id string) error
}

// RetryAfter is a [Platform] error that asks to wait before the next post
// or edit (a rate limit). The stream does not fail: it sends its latest
// text once the wait is over.
type RetryAfter struct {
	After time.Duration
	Err   error
}

func (e *RetryAfter) Error() string {
	return fmt.Sprintf("rate limited for %s: %v", e.After, e.Err)
}

func (e *RetryAfter) Unwrap() error { return e.Err }

// maxFinalWait bounds how long the final edit waits out rate limits; the
// delivering gateway waits for it (see Streams.wait).
const maxFinalWait = 5 * time.Second

// Config describes one channel's streams.
type Config struct {
	// Channel is the adapter's channel name.
	Channel string
	// Interval is the least time between two posts or edits of a turn.
	Interval time.Duration
	// Limit is the length of one message in UTF-16 units, the unit of
	// [markup.Split]; longer partial texts are cut, and the final edit
	// carries the answer's first piece as the adapter splits it.
	Limit int
}

// Streams follows the streams of one channel. Create it with [New] and
// start it with [Streams.Watch].
type Streams struct {
	cfg   Config
	bus   *bus.Bus
	kv    jetstream.KeyValue
	p     Platform
	log   *slog.Logger
	owner string // this process's name in stream entries
	wait  time.Duration

	mu    sync.Mutex
	live  map[string]*stream
	ended map[string]*stream // finished turns, to drop late deltas
}

// forget is how long finished and idle streams are remembered; it is also
// the entries' TTL.
const forget = 10 * time.Minute

// bucketStreams is the short name of the fleet's streams bucket.
const bucketStreams = "streams"

// Assets declares the fleet's streams bucket for [bus.Provision].
func Assets(sp subject.Space, _ bus.Layout) bus.Assets {
	return bus.Assets{Buckets: []jetstream.KeyValueConfig{{
		Bucket:      sp.Bucket(bucketStreams),
		Description: "answers being streamed by editing a message: which gateway edits, and how it ended",
		History:     1,
		TTL:         forget,
	}}}
}

// Option changes an optional setting of [New].
type Option func(*Streams)

// WithLogger sets the streams' logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(s *Streams) { s.log = observe.OrDiscard(l) } }

// New returns the streams of one channel; [Assets] must have been
// provisioned.
func New(ctx context.Context, cfg Config, b *bus.Bus, p Platform, opts ...Option) (*Streams, error) {
	if cfg.Interval <= 0 || cfg.Limit < 16 || cfg.Channel == "" {
		return nil, fmt.Errorf("editstream: invalid config %+v", cfg)
	}
	kv, err := b.KV(ctx, bucketStreams)
	if err != nil {
		return nil, fmt.Errorf("editstream: %w", err)
	}
	s := &Streams{
		cfg: cfg, bus: b, kv: kv, p: p, log: slog.New(slog.DiscardHandler), owner: rand.Text()[:10],
		wait: 2*cfg.Interval + 10*time.Second,
		live: map[string]*stream{}, ended: map[string]*stream{},
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// stream is one turn's message.
type stream struct {
	first   *nanofleetv1.OutboundMessage
	wake    chan struct{}
	stop    chan struct{} // closed when the turn ends
	done    chan struct{} // closed when the edit loop has returned
	claimed chan struct{} // closed when owner is known
	settled chan struct{} // closed when the owner has made the final edit or given up
	seen    time.Time

	mu     sync.Mutex
	text   strings.Builder
	owner  bool
	id     string    // the posted message, "" before the post
	shown  string    // the text last posted or edited
	next   time.Time // when the next post or edit may be sent
	failed bool
	ok     bool // the final edit delivered the first piece
}

// entry is a stream's record in the KV bucket.
type entry struct {
	Owner string `json:"owner"`
	// State is "streaming", then "done" (the final edit delivered the
	// first piece) or "failed".
	State string `json:"state"`
}

func (s *Streams) key(msg *nanofleetv1.OutboundMessage) string {
	return subject.Token(s.cfg.Channel) + "." + subject.Token(msg.GetChatId()) + "." + subject.Token(msg.GetReplyTo())
}

// Watch follows the channel's deltas and final answers until ctx ends or
// the returned function is called. A nil s (streaming off) follows
// nothing.
func (s *Streams) Watch(ctx context.Context) (func(), error) {
	if s == nil {
		return func() {}, nil
	}
	decode := func(m *nats.Msg) *nanofleetv1.OutboundMessage {
		out := &nanofleetv1.OutboundMessage{}
		if proto.Unmarshal(m.Data, out) != nil {
			return nil
		}
		return out
	}
	live, err := s.bus.NC.Subscribe(s.bus.Space.LiveChannel(s.cfg.Channel), func(m *nats.Msg) {
		if out := decode(m); out != nil && out.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA {
			s.delta(ctx, out)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("editstream: follow deltas: %w", err)
	}
	outbound, err := s.bus.NC.Subscribe(s.bus.Space.OutboundChannel(s.cfg.Channel), func(m *nats.Msg) {
		out := decode(m)
		if out == nil {
			return
		}
		switch out.GetKind() {
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL:
			go s.final(ctx, out)
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR:
			go s.final(ctx, out) // ends the stream; no final edit
		}
	})
	if err != nil {
		_ = live.Unsubscribe()
		return nil, fmt.Errorf("editstream: follow answers: %w", err)
	}
	return func() {
		_ = live.Unsubscribe()
		_ = outbound.Unsubscribe()
	}, nil
}

// delta adds a delta's text to its turn's stream, starting the stream at
// the first one. It does not wait for the platform.
func (s *Streams) delta(ctx context.Context, msg *nanofleetv1.OutboundMessage) {
	if msg.GetContent() == "" {
		return
	}
	k := s.key(msg)
	s.mu.Lock()
	s.prune()
	if s.ended[k] != nil {
		s.mu.Unlock()
		return
	}
	st := s.live[k]
	if st == nil {
		st = &stream{
			first: msg, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
			claimed: make(chan struct{}), settled: make(chan struct{}),
		}
		s.live[k] = st
		go s.run(ctx, k, st)
	}
	st.seen = time.Now()
	s.mu.Unlock()
	st.mu.Lock()
	st.text.WriteString(msg.GetContent())
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// prune forgets old finished turns and stops streams whose turn went
// quiet without an answer. Called with s.mu held.
func (s *Streams) prune() {
	cut := time.Now().Add(-forget)
	for k, st := range s.ended {
		if st.seen.Before(cut) {
			delete(s.ended, k)
		}
	}
	for k, st := range s.live {
		if st.seen.Before(cut) {
			close(st.stop)
			delete(s.live, k)
		}
	}
}

// run claims the stream and, when this gateway owns it, posts, then
// edits, until the turn ends.
func (s *Streams) run(ctx context.Context, k string, st *stream) {
	defer close(st.done)
	owner := s.claim(ctx, k)
	st.mu.Lock()
	st.owner = owner
	st.mu.Unlock()
	close(st.claimed)
	if !owner {
		return
	}
	for {
		select {
		case <-st.stop:
			return
		case <-ctx.Done():
			return
		case <-st.wake:
		}
		if !s.waitTurn(ctx, st, st.stop) {
			return
		}
		st.mu.Lock()
		text, id, failed := st.text.String(), st.id, st.failed
		st.mu.Unlock()
		text = s.clip(text)
		if failed || text == st.shown {
			continue
		}
		var err error
		if id == "" {
			id, err = s.p.Post(ctx, st.first, text)
		} else {
			err = s.p.Edit(ctx, st.first, id, text, false)
		}
		var limited *RetryAfter
		st.mu.Lock()
		st.next = time.Now().Add(s.cfg.Interval)
		switch {
		case errors.As(err, &limited):
			// Try again with the text of then, after the platform's wait.
			st.next = time.Now().Add(max(limited.After, s.cfg.Interval))
			select {
			case st.wake <- struct{}{}:
			default:
			}
			if id != "" {
				st.id = id
			}
		case err != nil:
			st.failed = true
			s.log.Info("streaming edit failed; the answer will be sent whole", "chat", st.first.GetChatId(), "err", err)
		default:
			st.id, st.shown = id, text
		}
		st.mu.Unlock()
	}
}

// claim makes this gateway the stream's owner, unless another gateway
// already is.
func (s *Streams) claim(ctx context.Context, k string) bool {
	data, _ := json.Marshal(entry{Owner: s.owner, State: "streaming"})
	_, err := s.kv.Create(ctx, k, data)
	if err == nil {
		return true
	}
	if !errors.Is(err, jetstream.ErrKeyExists) && ctx.Err() == nil {
		s.log.Warn("could not claim a stream; its answer will be sent whole", "key", k, "err", err)
	}
	return false
}

// waitTurn waits until the stream may send again; false when stop closes
// (nil: never) or ctx ends first.
func (s *Streams) waitTurn(ctx context.Context, st *stream, stop <-chan struct{}) bool {
	st.mu.Lock()
	d := time.Until(st.next)
	st.mu.Unlock()
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// clip cuts a partial text to the limit.
func (s *Streams) clip(text string) string {
	text = strings.TrimSpace(text)
	if markup.Len(text) <= s.cfg.Limit {
		return text
	}
	var b strings.Builder
	n := 0
	for _, r := range text {
		n += max(1, utf16.RuneLen(r))
		if n > s.cfg.Limit-1 { // room for the ellipsis
			break
		}
		b.WriteRune(r)
	}
	return b.String() + "…"
}

// final ends msg's turn on this gateway; the owner makes the final edit
// (for a final answer) and records how it went.
func (s *Streams) final(ctx context.Context, msg *nanofleetv1.OutboundMessage) {
	k := s.key(msg)
	s.mu.Lock()
	st := s.live[k]
	if st == nil {
		if s.ended[k] == nil {
			// No delta seen: remember the turn so late ones are dropped.
			st = &stream{done: make(chan struct{}), claimed: make(chan struct{}), settled: make(chan struct{}), seen: time.Now()}
			close(st.done)
			close(st.claimed)
			close(st.settled)
			s.ended[k] = st
		}
		s.mu.Unlock()
		return
	}
	delete(s.live, k)
	s.ended[k] = st
	close(st.stop)
	s.mu.Unlock()

	defer close(st.settled)
	select {
	case <-st.done:
	case <-ctx.Done():
		return
	}
	st.mu.Lock()
	owner, id, failed, shown := st.owner, st.id, st.failed, st.shown
	st.mu.Unlock()
	if !owner {
		return
	}
	ok := false
	if pieces := markup.Split(msg.GetContent(), s.cfg.Limit); msg.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL && len(pieces) > 0 && id != "" && !failed {
		switch {
		case pieces[0] == shown && !mustFinalize(s.p):
			ok = true // already on screen; some platforms refuse a no-op edit
		default:
			ok = s.finalEdit(ctx, st, msg, id, pieces[0])
		}
	}
	if d, can := s.p.(Deleter); can && !ok && id != "" {
		if err := d.Delete(ctx, msg, id); err != nil {
			s.log.Info("could not delete the partial message of a failed stream", "chat", msg.GetChatId(), "err", err)
		}
	}
	st.mu.Lock()
	st.ok = ok
	st.mu.Unlock()
	state := "failed"
	if ok {
		state = "done"
	}
	data, _ := json.Marshal(entry{Owner: s.owner, State: state})
	if _, err := s.kv.Put(context.WithoutCancel(ctx), k, data); err != nil {
		s.log.Warn("record the end of a stream", "key", k, "err", err)
	}
}

// Finalizer is a [Platform] whose streamed message stays open until the
// final edit (DingTalk's AI card shows "generating" until finalized), so
// that edit is made even when the whole answer is already shown.
type Finalizer interface {
	FinalEditRequired() bool
}

func mustFinalize(p Platform) bool {
	f, ok := p.(Finalizer)
	return ok && f.FinalEditRequired()
}

// finalEdit edits the final answer's first piece in, waiting out rate
// limits up to maxFinalWait.
func (s *Streams) finalEdit(ctx context.Context, st *stream, msg *nanofleetv1.OutboundMessage, id, piece string) bool {
	deadline := time.Now().Add(maxFinalWait)
	for s.waitTurn(ctx, st, nil) {
		err := s.p.Edit(ctx, msg, id, piece, true)
		if err == nil {
			return true
		}
		var limited *RetryAfter
		if !errors.As(err, &limited) || time.Now().Add(limited.After).After(deadline) {
			s.log.Info("final streaming edit failed; the answer will be sent whole", "chat", msg.GetChatId(), "err", err)
			return false
		}
		st.mu.Lock()
		st.next = time.Now().Add(limited.After)
		st.mu.Unlock()
	}
	return false
}

// Start is where delivering the pieces (n of them) of msg starts: after
// those the fleet already sent (sent counts them), or after the first
// when none was and the streamed message became it (see Finish), which
// sent then counts. A nil s streams nothing. Its errors are sent's.
func (s *Streams) Start(ctx context.Context, msg *nanofleetv1.OutboundMessage, n int, sent *parts.Store) (int, error) {
	start, err := sent.Sent(ctx, msg.GetId())
	if err != nil {
		return 0, err
	}
	if s != nil && start == 0 && msg.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL && n > 0 && s.Finish(ctx, msg) {
		start = 1
		if err := sent.Mark(context.WithoutCancel(ctx), msg.GetId(), 1); err != nil {
			s.log.Warn("streamed piece not recorded; a redelivery would send it again", "id", msg.GetId(), "err", err)
		}
	}
	return start, nil
}

// Finish reports whether the first piece of msg, a final answer, was
// delivered by editing the streamed message, waiting for the stream's
// owner (this gateway or another) to say. When false (no stream, the
// stream failed, or its owner did not report in time) the caller sends
// the answer as usual.
func (s *Streams) Finish(ctx context.Context, msg *nanofleetv1.OutboundMessage) bool {
	k := s.key(msg)
	s.mu.Lock()
	st := s.live[k]
	if st == nil {
		st = s.ended[k]
	}
	s.mu.Unlock()
	if st != nil && st.first == nil {
		st = nil // a turn ended without deltas here
	}
	ctx, cancel := context.WithTimeout(ctx, s.wait)
	defer cancel()
	if st != nil {
		select {
		case <-st.claimed:
		case <-ctx.Done():
			return false
		}
		st.mu.Lock()
		owner := st.owner
		st.mu.Unlock()
		if owner {
			select {
			case <-st.settled:
			case <-ctx.Done():
				return false
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			return st.ok
		}
	}
	// Another gateway owns the stream, or this one saw none: ask the
	// bucket.
	e, err := s.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) && st == nil {
		return false // no stream anywhere
	}
	if err == nil && ended(e) {
		return state(e) == "done"
	}
	w, err := s.kv.Watch(ctx, k)
	if err != nil {
		return false
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e := <-w.Updates():
			if e != nil && ended(e) {
				return state(e) == "done"
			}
		case <-ctx.Done():
			s.log.Info("no word from the gateway streaming this answer; sending it whole", "key", k)
			return false
		}
	}
}

func state(e jetstream.KeyValueEntry) string {
	var v entry
	_ = json.Unmarshal(e.Value(), &v)
	return v.State
}

func ended(e jetstream.KeyValueEntry) bool {
	st := state(e)
	return st == "done" || st == "failed"
}
