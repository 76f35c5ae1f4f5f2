package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// BucketName is the short name of the KV bucket of running children.
const BucketName = "subagents"

// bucketTTL removes records nobody cleaned up (a child whose result never
// came) long after StaleAfter stopped counting them.
const bucketTTL = 24 * time.Hour

// Assets declares the bucket of running children for [bus.Provision].
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.KeyValue(jetstream.KeyValueConfig{
		Bucket:      BucketName,
		Description: "running subagents by parent session",
		TTL:         bucketTTL,
		History:     1,
	})(sp, l)
}

// Manager runs the fleet side of subagents: the spawn tool, the announcer
// and the stop forwarder.
type Manager struct {
	b        *bus.Bus
	cfg      Config
	log      *slog.Logger
	kv       jetstream.KeyValue
	inbound  jetstream.Stream
	outbound jetstream.Stream
	now      func() time.Time
	// listening is closed once a Run forwards /stop (see Listening).
	listening     chan struct{}
	listeningOnce sync.Once
}

// Option changes an optional setting of [New].
type Option func(*Manager)

// WithLogger sets the manager's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(m *Manager) { m.log = observe.OrDiscard(l) } }

// New opens the bucket and streams; [Assets] must have been provisioned.
func New(ctx context.Context, cfg Config, b *bus.Bus, opts ...Option) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errors.New("subagent: bus is required")
	}
	kv, err := b.KV(ctx, BucketName)
	if err != nil {
		return nil, fmt.Errorf("subagent: %w", err)
	}
	in, err := b.JS.Stream(ctx, b.Space.InboundStream())
	if err != nil {
		return nil, fmt.Errorf("subagent: inbound stream: %w", err)
	}
	out, err := b.JS.Stream(ctx, b.Space.OutboundStream())
	if err != nil {
		return nil, fmt.Errorf("subagent: outbound stream: %w", err)
	}
	m := &Manager{b: b, cfg: cfg, log: slog.New(slog.DiscardHandler), kv: kv, inbound: in, outbound: out, now: time.Now, listening: make(chan struct{})}
	for _, o := range opts {
		o(m)
	}
	m.log = m.log.With("component", "subagent")
	return m, nil
}

// record is a child's entry in the bucket.
type record struct {
	ID            string `json:"id"`
	Child         string `json:"child"`
	Parent        string `json:"parent"`
	Label         string `json:"label"`
	Task          string `json:"task"`
	OriginChannel string `json:"origin_channel"`
	OriginChat    string `json:"origin_chat"`
	// OriginSender is the sender of the turn that spawned the child, and
	// OriginGroup whether that turn was in a group chat: the child and
	// its announcement are that user's turns.
	OriginSender string `json:"origin_sender,omitempty"`
	OriginGroup  bool   `json:"origin_group,omitempty"`
	Wait         bool   `json:"wait,omitempty"`
	Stopped      bool   `json:"stopped,omitempty"`
	InboundSeq   uint64 `json:"inbound_seq,omitempty"`
	// ParentSeq is the inbound sequence of the parent turn's message: a
	// /stop stops only children of turns before it. 0 in records written
	// before the field existed.
	ParentSeq uint64    `json:"parent_seq,omitempty"`
	Created   time.Time `json:"created"`
}

// Child describes a running subagent.
type Child struct {
	ID, Label, Task string
	// SessionKey is the child's session.
	SessionKey string
	Wait       bool
	Stopped    bool
	Created    time.Time
}

// childChat is the chat id of a child on [Channel].
func childChat(parent, id string) string { return parent + ":" + id }

// childSession is a child's session key.
func childSession(parent, id string) string { return Channel + ":" + childChat(parent, id) }

func recordKey(parent, id string) string { return subject.Token(parent) + "." + id }

func (m *Manager) get(ctx context.Context, key string) (*record, uint64, error) {
	e, err := bus.Get(ctx, m.kv, key)
	if err != nil {
		return nil, 0, err
	}
	r := &record{}
	if err := json.Unmarshal(e.Value(), r); err != nil {
		return nil, 0, fmt.Errorf("decode subagent record %s: %w", key, err)
	}
	return r, e.Revision(), nil
}

func (m *Manager) put(ctx context.Context, key string, r *record, rev uint64) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode subagent record: %w", err)
	}
	_, err = bus.CompareAndSet(ctx, m.kv, key, data, rev)
	return err
}

// update applies change to a record with compare-and-set ([bus.Modify]:
// a write that lost is read and made again); an error matching
// jetstream.ErrKeyNotFound if there is none.
func (m *Manager) update(ctx context.Context, key string, change func(*record)) (*record, error) {
	var r *record
	_, err := bus.Modify(ctx, m.kv, key, func(old []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, jetstream.ErrKeyNotFound
		}
		r = &record{}
		if err := json.Unmarshal(old, r); err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
		change(r)
		return json.Marshal(r)
	})
	if err != nil {
		return nil, fmt.Errorf("update subagent record %s: %w", key, err)
	}
	return r, nil
}

// records returns the parent's children's records by key.
func (m *Manager) records(ctx context.Context, parent string) (map[string]*record, error) {
	lister, err := m.kv.ListKeysFiltered(ctx, subject.Token(parent)+".*")
	if err != nil {
		return nil, fmt.Errorf("list subagents of %s: %w", parent, err)
	}
	keys := []string{}
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	out := make(map[string]*record, len(keys))
	for _, k := range keys {
		r, _, err := m.get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[k] = r
	}
	return out, nil
}

// Children lists the parent session's subagents that still run (or whose
// result has not been delivered yet).
func (m *Manager) Children(ctx context.Context, parent string) ([]Child, error) {
	recs, err := m.records(ctx, parent)
	if err != nil {
		return nil, err
	}
	out := make([]Child, 0, len(recs))
	for _, r := range recs {
		if m.running(r) {
			out = append(out, Child{ID: r.ID, Label: r.Label, Task: r.Task, SessionKey: r.Child, Wait: r.Wait, Stopped: r.Stopped, Created: r.Created})
		}
	}
	return out, nil
}

func (m *Manager) running(r *record) bool {
	return !r.Stopped && m.now().Sub(r.Created) < m.cfg.StaleAfter
}
