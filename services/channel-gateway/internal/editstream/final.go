package editstream

import (
	"context"
	"encoding/json"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// maxFinalWait bounds how long the final edit waits out rate limits; the
// delivering gateway waits for it (see Streams.wait).
const maxFinalWait = 5 * time.Second

// end ends msg's turn on this gateway so that later deltas are dropped,
// and returns its stream, or nil when the turn had none.
func (s *Streams) end(msg *nanofleetv1.OutboundMessage) *stream {
	k := s.key(msg)
	s.mu.Lock()
	st := s.live[k]
	if st == nil {
		if s.ended[k] == nil {
			// No delta seen: remember the turn so late ones are dropped.
			// Every answer of the channel leaves one for ten minutes, so
			// it is bare: Finish reads a stream without a first delta as
			// none and waits on nothing of it.
			s.ended[k] = &stream{seen: time.Now()}
		}
		s.mu.Unlock()
		return nil
	}
	delete(s.live, k)
	s.ended[k] = st
	close(st.stop)
	s.mu.Unlock()
	return st
}

// settle finishes the ended stream st: the owner makes the final edit (for
// a final answer) and records how it went.
func (s *Streams) settle(ctx context.Context, st *stream, msg *nanofleetv1.OutboundMessage) {
	k := s.key(msg)
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
	if pieces := s.split(msg.GetContent()); msg.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL && len(pieces) > 0 && id != "" && !failed {
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

// split cuts an answer into pieces as the adapter does.
func (s *Streams) split(md string) []string {
	if s.cfg.Size != nil {
		return markup.SplitRendered(md, s.cfg.Limit, s.cfg.Most, s.cfg.Size)
	}
	return markup.Split(md, s.cfg.Limit)
}

// finalEdit edits the final answer's first piece in, waiting out rate
// limits up to maxFinalWait.
func (s *Streams) finalEdit(ctx context.Context, st *stream, msg *nanofleetv1.OutboundMessage, id, piece string) bool {
	deadline := s.clock.Now().Add(maxFinalWait)
	for s.waitTurn(ctx, st, nil) {
		err := s.p.Edit(ctx, msg, id, piece, true)
		if err == nil {
			return true
		}
		after, limited := rateLimited(err)
		if !limited || s.clock.Now().Add(after).After(deadline) {
			s.log.Info("final streaming edit failed; the answer will be sent whole", "chat", msg.GetChatId(), "err", err)
			return false
		}
		st.mu.Lock()
		st.next = s.clock.Now().Add(after)
		st.mu.Unlock()
	}
	return false
}
