package worker

import (
	"context"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// MarkAnswered states, for a test, that this worker committed and answered
// the session's turn of inbound sequence seq.
func (w *Worker) MarkAnswered(key string, seq uint64) { w.markAnswered(key, seq) }

// StaleReads makes the first n reads of the inbound stream by message
// answer "not found", as a replica behind its leader does: call it
// before Run.
func (w *Worker) StaleReads(n int) {
	w.inbound = &staleStream{Stream: w.inbound, left: int64(n)}
}

type staleStream struct {
	jetstream.Stream
	left int64 // atomic
}

func (s *staleStream) GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	if atomic.AddInt64(&s.left, -1) >= 0 {
		return nil, jetstream.ErrMsgNotFound
	}
	return s.Stream.GetMsg(ctx, seq, opts...)
}
