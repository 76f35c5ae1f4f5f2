package llm

import (
	"container/list"
	"context"
	"math"
	"sync"
)

// limiter bounds the calls in flight to one provider, additive increase,
// multiplicative decrease: a 429 halves the limit, each success raises it
// by one, up to the configured ceiling (none when zero). Waiting callers
// are served in arrival order. A turn waiting here holds its turn slot but
// no HTTP connection, so a 429 storm slows the fleet down instead of
// piling retries onto the provider.
type limiter struct {
	mu       sync.Mutex
	ceiling  int // 0: no configured limit
	limit    int
	inflight int
	// epoch counts decreases: a 429 from a call that started before the
	// last decrease was sent under the old limit and does not halve again,
	// so a burst of 429s answered together counts once.
	epoch   uint64
	waiters list.List // of chan struct{}, closed when granted
}

func newLimiter(ceiling int) *limiter {
	l := &limiter{ceiling: ceiling, limit: ceiling}
	if ceiling <= 0 {
		l.limit = math.MaxInt
	}
	return l
}

// acquire waits for a free place and returns the epoch it started in.
func (l *limiter) acquire(ctx context.Context) (uint64, error) {
	l.mu.Lock()
	if l.inflight < l.limit && l.waiters.Len() == 0 {
		l.inflight++
		e := l.epoch
		l.mu.Unlock()
		return e, nil
	}
	ch := make(chan struct{})
	el := l.waiters.PushBack(ch)
	l.mu.Unlock()
	select {
	case <-ch:
		l.mu.Lock()
		e := l.epoch
		l.mu.Unlock()
		return e, nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		select {
		case <-ch: // granted while giving up: hand the place on
			l.inflight--
			l.grant()
		default:
			l.waiters.Remove(el)
		}
		return 0, ctx.Err()
	}
}

// release ends a call started in epoch; limited says the provider answered
// 429.
func (l *limiter) release(epoch uint64, limited bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	switch {
	case limited && epoch == l.epoch:
		l.epoch++
		// Half of what was in flight when the provider refused, counting
		// this call: the old limit may be far above what was used.
		l.limit = max(1, min(l.limit, l.inflight+1)/2)
	case !limited && l.limit < math.MaxInt && (l.ceiling <= 0 || l.limit < l.ceiling):
		l.limit++
	}
	l.grant()
}

// grant hands free places to the oldest waiters. Called with mu held.
func (l *limiter) grant() {
	for l.inflight < l.limit && l.waiters.Len() > 0 {
		ch := l.waiters.Remove(l.waiters.Front()).(chan struct{})
		l.inflight++
		close(ch)
	}
}

// current returns the limit and the calls in flight (tests, metrics).
func (l *limiter) current() (limit, inflight int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit, l.inflight
}
