package observe

import (
	"log/slog"
	"sync"
	"time"
)

// Throttled writes a warning that anyone may cause at will (a refused
// login, a forged webhook, a cross-origin post) at most once per interval,
// with how many more there were since its last line: a stranger's flood
// of refusals must not become a flood of log lines (about 140 bytes each).
// One Throttled per kind of refusal.
type Throttled struct {
	log   *slog.Logger
	every time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// ThrottleEvery is how often a Throttled writes at most.
const ThrottleEvery = 10 * time.Second

// NewThrottled writes to log (nil: nowhere) at most once per every.
func NewThrottled(log *slog.Logger, every time.Duration) *Throttled {
	return &Throttled{log: OrDiscard(log), every: every}
}

// Warn writes msg with args, or counts it when a line went out less than
// the interval ago; the next line says how many it stands for
// ("suppressed").
func (t *Throttled) Warn(msg string, args ...any) {
	t.mu.Lock()
	now := time.Now()
	if !t.last.IsZero() && now.Sub(t.last) < t.every {
		t.suppressed++
		t.mu.Unlock()
		return
	}
	n := t.suppressed
	t.last, t.suppressed = now, 0
	t.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	t.log.Warn(msg, args...)
}
