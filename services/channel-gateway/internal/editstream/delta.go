package editstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

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

// pruneEvery is how often prune looks: it walks every turn of the last
// ten minutes, and a busy channel's deltas come far more often (each
// walk took 1 ms with 50,000 turns, on the goroutine every delta and final
// of the channel passes through).
const pruneEvery = time.Second

// prune forgets old finished turns and stops streams whose turn went
// quiet without an answer, at most once per pruneEvery. Called with s.mu
// held.
func (s *Streams) prune() {
	now := time.Now()
	if now.Sub(s.pruned) < pruneEvery {
		return
	}
	s.pruned = now
	cut := now.Add(-forget)
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
		after, limited := rateLimited(err)
		st.mu.Lock()
		st.next = s.clock.Now().Add(s.cfg.Interval)
		switch {
		case limited:
			// Try again with the text of then, after the platform's wait.
			st.next = s.clock.Now().Add(max(after, s.cfg.Interval))
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
	d := st.next.Sub(s.clock.Now())
	st.mu.Unlock()
	if d <= 0 {
		return true
	}
	select {
	case <-s.clock.After(d):
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// clip cuts a partial text to the limit, and to what the platform takes
// once it is rendered.
func (s *Streams) clip(text string) string {
	text = markup.Truncate(strings.TrimSpace(text), s.cfg.Limit)
	if s.cfg.Size != nil {
		text = markup.TruncateRendered(text, s.cfg.Most, s.cfg.Size)
	}
	return text
}
