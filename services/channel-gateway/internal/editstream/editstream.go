// Package editstream shows an answer while the model writes it, on
// platforms that can edit a sent message (Telegram, Slack, Discord): the
// first delta of a turn posts one message at once, later deltas edit it at
// most once per interval, and the final answer replaces its text whole.
//
// Guarantees: at most one post or edit per interval per turn, the final
// edit included; the final text is delivered whole exactly once — by the
// final edit, or, when the stream failed (a post or edit error) or never
// began, by the adapter's ordinary delivery, which [Streams.Finish] asks
// for by returning false. Deltas that arrive after the final answer are
// dropped.
//
// Deltas reach the gateway on core NATS through a queue group, so the
// stream state is per process: with several gateways, the deltas of one
// turn may be shared among them (see docs/ARCHITECTURE.md).
package editstream

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Platform posts and edits messages for the streams.
type Platform interface {
	// Post sends text as a new message in msg's chat (replying to the
	// asking message) and returns the new message's id.
	Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, text string) (id string, err error)
	// Edit replaces the text of message id. final is set for the final
	// answer, which a platform may render richer than the partial texts.
	Edit(ctx context.Context, msg *nanofleetv1.OutboundMessage, id, text string, final bool) error
}

// Streams follows the streams of one channel. Create it with [New].
type Streams struct {
	p        Platform
	interval time.Duration
	limit    int
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex
	live    map[string]*stream
	settled map[string]time.Time // finished keys, to drop late deltas
}

// forget is how long finished and idle streams are remembered.
const forget = 10 * time.Minute

// New returns streams that edit at most once per interval and show at
// most limit UTF-16 units (longer partial texts are cut).
func New(p Platform, interval time.Duration, limit int, log *slog.Logger) *Streams {
	return &Streams{
		p: p, interval: interval, limit: limit, log: log, now: time.Now,
		live: map[string]*stream{}, settled: map[string]time.Time{},
	}
}

// stream is one turn's message.
type stream struct {
	first *nanofleetv1.OutboundMessage
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	seen  time.Time

	mu     sync.Mutex
	text   strings.Builder
	id     string    // the posted message, "" before the post
	shown  string    // the text last posted or edited
	next   time.Time // when the next edit may be sent
	failed bool
}

// key identifies a turn: its chat and the message it answers.
func key(msg *nanofleetv1.OutboundMessage) string {
	return msg.GetChatId() + "\x00" + msg.GetReplyTo()
}

// Delta adds a delta's text to its turn's stream, starting the stream at
// the first one. It does not wait for the platform; ctx bounds the
// stream's posts and edits.
func (s *Streams) Delta(ctx context.Context, msg *nanofleetv1.OutboundMessage) {
	if msg.GetContent() == "" {
		return
	}
	k := key(msg)
	s.mu.Lock()
	s.prune()
	if _, ok := s.settled[k]; ok {
		s.mu.Unlock()
		return
	}
	st := s.live[k]
	if st == nil {
		st = &stream{first: msg, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
		s.live[k] = st
		go s.run(ctx, st)
	}
	st.seen = s.now()
	s.mu.Unlock()
	st.mu.Lock()
	st.text.WriteString(msg.GetContent())
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// prune forgets old settled keys and stops streams whose turn went quiet
// without a final answer. Called with s.mu held.
func (s *Streams) prune() {
	cut := s.now().Add(-forget)
	for k, t := range s.settled {
		if t.Before(cut) {
			delete(s.settled, k)
		}
	}
	for k, st := range s.live {
		if st.seen.Before(cut) {
			close(st.stop)
			delete(s.live, k)
		}
	}
}

// run posts, then edits, until stopped.
func (s *Streams) run(ctx context.Context, st *stream) {
	defer close(st.done)
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
		st.mu.Lock()
		st.next = s.now().Add(s.interval)
		if err != nil {
			st.failed = true
			s.log.Info("streaming edit failed; the answer will be sent whole", "chat", st.first.GetChatId(), "err", err)
		} else {
			st.id, st.shown = id, text
		}
		st.mu.Unlock()
	}
}

// waitTurn waits until the stream may send again; false when stop closes
// (nil: never) or ctx ends first.
func (s *Streams) waitTurn(ctx context.Context, st *stream, stop <-chan struct{}) bool {
	st.mu.Lock()
	d := st.next.Sub(s.now())
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

// clip cuts a partial text to the limit; the final answer is split by the
// adapter instead.
func (s *Streams) clip(text string) string {
	text = strings.TrimSpace(text)
	if markup.Len(text) <= s.limit {
		return text
	}
	var b strings.Builder
	n := 0
	for _, r := range text {
		n += max(1, utf16.RuneLen(r))
		if n > s.limit-1 { // room for the ellipsis
			break
		}
		b.WriteRune(r)
	}
	return b.String() + "…"
}

// Finish ends msg's stream with the final answer's first piece. It
// reports whether the piece was delivered by editing the streamed
// message; when false (no stream, or the stream failed, or this edit
// failed) the caller sends the answer as usual. Either way the turn's
// later deltas are dropped.
func (s *Streams) Finish(ctx context.Context, msg *nanofleetv1.OutboundMessage, piece string) bool {
	st := s.settle(msg)
	if st == nil {
		return false
	}
	select {
	case <-st.done:
	case <-ctx.Done():
		return false
	}
	st.mu.Lock()
	id, failed, shown := st.id, st.failed, st.shown
	st.mu.Unlock()
	if id == "" || failed {
		return false
	}
	if piece == shown {
		return true // already on screen; some platforms refuse a no-op edit
	}
	if !s.waitTurn(ctx, st, nil) {
		return false
	}
	if err := s.p.Edit(ctx, msg, id, piece, true); err != nil {
		s.log.Info("final streaming edit failed; sending the answer whole", "chat", msg.GetChatId(), "err", err)
		return false
	}
	return true
}

// Abandon ends msg's stream without a final edit (the turn failed).
func (s *Streams) Abandon(msg *nanofleetv1.OutboundMessage) { s.settle(msg) }

// settle marks msg's turn finished and stops its stream, returning it.
func (s *Streams) settle(msg *nanofleetv1.OutboundMessage) *stream {
	k := key(msg)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settled[k] = s.now()
	st := s.live[k]
	if st == nil {
		return nil
	}
	delete(s.live, k)
	close(st.stop)
	return st
}
