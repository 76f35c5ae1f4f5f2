package editstream

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

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
	// Size, when set, measures a text as the platform counts it once the
	// adapter has rendered it, and Most is the most it may measure:
	// partial texts are cut until they fit, and the final edit carries the
	// first piece of [markup.SplitRendered] (Limit, Most, Size), which the
	// adapter then splits its answers with too.
	Size func(md string) int
	Most int
}

// Streams follows the streams of one channel. Create it with [New] and
// start it with [Streams.Watch].
type Streams struct {
	cfg   Config
	bus   *bus.Bus
	kv    jetstream.KeyValue
	p     Platform
	log   *slog.Logger
	clock Clock
	owner string // this process's name in stream entries
	wait  time.Duration

	mu    sync.Mutex
	live  map[string]*stream
	ended map[string]*stream // finished turns, to drop late deltas
	// pruned is when prune last looked.
	pruned time.Time
}

// forget is how long finished and idle streams are remembered; it is also
// the entries' TTL.
const forget = 10 * time.Minute

// bucketStreams is the short name of the fleet's streams bucket.
const bucketStreams = "streams"

// Assets declares the fleet's streams bucket for [bus.Provision].
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.KeyValue(jetstream.KeyValueConfig{
		Bucket:      bucketStreams,
		Description: "answers being streamed by editing a message: which gateway edits, and how it ended",
		History:     1,
		TTL:         forget,
	})(sp, l)
}

// Option changes an optional setting of [New].
type Option func(*Streams)

// WithLogger sets the streams' logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(s *Streams) { s.log = observe.OrDiscard(l) } }

// Clock is the time a turn's posts and edits are paced by.
type Clock interface {
	Now() time.Time
	// After sends the time on the channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

// systemClock is the system's time.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// WithClock sets the clock that paces posts and edits; the default is
// the system's. A nil c keeps the default.
func WithClock(c Clock) Option {
	return func(s *Streams) {
		if c != nil {
			s.clock = c
		}
	}
}

// New returns the streams of one channel; [Assets] must have been
// provisioned.
func New(ctx context.Context, cfg Config, b *bus.Bus, p Platform, opts ...Option) (*Streams, error) {
	if cfg.Interval <= 0 || cfg.Limit < 16 || cfg.Channel == "" || (cfg.Size != nil && cfg.Most < 16) {
		return nil, fmt.Errorf("editstream: invalid config %+v", cfg)
	}
	kv, err := b.KV(ctx, bucketStreams)
	if err != nil {
		return nil, fmt.Errorf("editstream: %w", err)
	}
	s := &Streams{
		cfg: cfg, bus: b, kv: kv, p: p, log: slog.New(slog.DiscardHandler), clock: systemClock{}, owner: rand.Text()[:10],
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
	// Both subscriptions feed one channel read by one goroutine: nats.go
	// dispatches each callback subscription on a goroutine of its own, so
	// a turn's late delta could be handled before its final answer and
	// start a stream after the turn had ended.
	// nats.go drops what a full channel cannot take; the reader only
	// takes locks held for map and buffer updates, never a platform call.
	msgs := make(chan *nats.Msg, 16384)
	live, err := s.bus.NC.ChanSubscribe(s.bus.Space.LiveChannel(s.cfg.Channel), msgs)
	if err != nil {
		return nil, fmt.Errorf("editstream: follow deltas: %w", err)
	}
	outbound, err := s.bus.NC.ChanSubscribe(s.bus.Space.OutboundChannel(s.cfg.Channel), msgs)
	if err != nil {
		_ = live.Unsubscribe()
		return nil, fmt.Errorf("editstream: follow answers: %w", err)
	}
	quit := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-quit:
				return
			case m := <-msgs:
				s.dispatch(ctx, m, m.Sub == live)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = live.Unsubscribe()
			_ = outbound.Unsubscribe()
			close(quit)
		})
	}, nil
}

// dispatch handles one message of the channel's live or outbound
// subject, in the order they arrived.
func (s *Streams) dispatch(ctx context.Context, m *nats.Msg, live bool) {
	out := &nanofleetv1.OutboundMessage{}
	if proto.Unmarshal(m.Data, out) != nil {
		return
	}
	switch kind := out.GetKind(); {
	case live && kind == nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA:
		s.delta(ctx, out)
	case !live && (kind == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL || kind == nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR):
		// The turn ends here, before any later delta is read; the final
		// edit (none for an error) waits for the platform elsewhere.
		if st := s.end(out); st != nil {
			go s.settle(ctx, st, out)
		}
	}
}
