// Package storeguard watches the filesystem that holds a JetStream store
// and says when it is full, so that the fleet refuses new messages at once
// with a clear reason instead of letting writes hang, and recovers on its
// own once space is freed.
//
// A nats-server whose disk fills does not answer the publishes it cannot
// write (the client waits out its timeout), and a stream that failed a
// write keeps failing after space returns. The guard sees the fill before
// the server does (free space below a reserve), and when space comes back
// it runs a recovery function: for the embedded server, re-enabling
// JetStream, which reopens every stream from disk.
//
// The state changes only on its own check loop; Err is safe to call from
// any goroutine.
package storeguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nanofleet/nanofleet/pkg/every"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// Config says what to watch.
type Config struct {
	// Dir is a directory on the filesystem of the store. Required.
	Dir string
	// MinFree is the free space below which the store counts as full
	// (default 32 MiB), or a quarter of the filesystem when that is less,
	// so that a small volume is not full while empty. It recovers at twice
	// that, so that a store at the edge does not flap.
	MinFree int64
	// Interval between checks (default 1 s).
	Interval time.Duration
	// Usage, when set, reports the server's store use and limit (the
	// embedded server's defaults to most of the disk it started on); the
	// store is full as well when less than MinFree is left below the
	// limit, where the server refuses new messages.
	Usage func() (used, limit int64, err error)
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("storeguard: dir is required")
	case c.MinFree < 0:
		return fmt.Errorf("storeguard: minFree must not be negative, got %d", c.MinFree)
	case c.Interval < 0:
		return fmt.Errorf("storeguard: interval must not be negative, got %s", c.Interval)
	}
	return nil
}

// Guard tracks whether the store is full.
type Guard struct {
	cfg       Config
	log       *slog.Logger
	onRecover func(context.Context) error
	full      prometheus.Gauge
	free      prometheus.Gauge

	mu  sync.Mutex
	err error
}

// Option changes an optional setting of [New].
type Option func(*Guard)

// WithLogger sets the guard's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(g *Guard) { g.log = observe.OrDiscard(l) } }

// New returns a guard for cfg whose metrics are registered on reg.
// onRecover, when not nil, runs once space is back; until it succeeds the
// store stays full.
func New(cfg Config, reg prometheus.Registerer, onRecover func(context.Context) error, opts ...Option) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MinFree == 0 {
		cfg.MinFree = 32 << 20
	}
	var st unix.Statfs_t
	if err := unix.Statfs(cfg.Dir, &st); err == nil {
		// The volume's size, not the store limit's: the server sets its
		// limit from the space free when it starts, so a small limit is a
		// full disk as often as a small one.
		cfg.MinFree = min(cfg.MinFree, int64(st.Blocks)*int64(st.Bsize)/4)
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	g := &Guard{
		cfg: cfg, log: slog.New(slog.DiscardHandler), onRecover: onRecover,
		full: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nanofleet_storage_full",
			Help: "1 while the JetStream store's filesystem is full and new messages are refused.",
		}),
		free: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nanofleet_storage_free_bytes",
			Help: "Bytes the JetStream store can still take: free space on its filesystem, or below the server's store limit if that is less.",
		}),
	}
	for _, o := range opts {
		o(g)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{g.full, g.free} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("storeguard: register metrics: %w", err)
			}
		}
	}
	return g, nil
}

// Dir is the directory whose file system the guard watches.
func (g *Guard) Dir() string { return g.cfg.Dir }

// MinFree is the free space below which the store counts as full (the
// configured value, or its default, at most a quarter of the filesystem);
// it counts as recovered at twice it.
func (g *Guard) MinFree() int64 { return g.cfg.MinFree }

// Err returns a *FullError while the store is full, else nil.
func (g *Guard) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Ready is Err in the shape of a readiness check.
func (g *Guard) Ready(context.Context) error { return g.Err() }

// Run checks the store until ctx ends.
func (g *Guard) Run(ctx context.Context) error {
	every.TickNow(ctx, g.cfg.Interval, func() bool { g.Check(ctx); return true })
	return nil
}

// Check looks at the filesystem once and updates the state.
func (g *Guard) Check(ctx context.Context) {
	var st unix.Statfs_t
	if err := unix.Statfs(g.cfg.Dir, &st); err != nil {
		g.log.Warn("storeguard: statfs", "dir", g.cfg.Dir, "err", err)
		return
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	total := int64(st.Blocks) * int64(st.Bsize)
	what := "the filesystem of " + g.cfg.Dir
	if g.cfg.Usage != nil {
		if used, limit, err := g.cfg.Usage(); err != nil {
			g.log.Warn("storeguard: store usage", "err", err)
		} else if limit > 0 && limit-used < free {
			free, total, what = max(0, limit-used), limit, "the JetStream store limit"
		}
	}
	g.free.Set(float64(free))
	g.mu.Lock()
	wasFull := g.err != nil
	g.mu.Unlock()
	switch {
	case !wasFull && free < g.cfg.MinFree:
		g.set(&FullError{What: what, Free: free, Total: total})
		g.log.Error("storage full: new messages are refused until space is freed", "full", what,
			"free_bytes", free, "total_bytes", total, "reserve_bytes", g.cfg.MinFree)
	case wasFull && free >= 2*g.cfg.MinFree:
		if g.onRecover != nil {
			if err := g.onRecover(ctx); err != nil {
				g.log.Error("storage freed but the store did not recover; will retry", "dir", g.cfg.Dir, "err", err)
				return
			}
		}
		g.set(nil)
		g.log.Info("storage recovered: accepting messages again", "dir", g.cfg.Dir, "free_bytes", free)
	case wasFull:
		g.set(&FullError{What: what, Free: free, Total: total})
	}
}

func (g *Guard) set(err error) {
	g.mu.Lock()
	g.err = err
	g.mu.Unlock()
	if err != nil {
		g.full.Set(1)
	} else {
		g.full.Set(0)
	}
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
