package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/config"
)

// Layout is the tunable part of the fleet's JetStream layout.
type Layout struct {
	// Replicas of every stream and bucket (1 for a single server, 3 for a
	// cluster).
	Replicas int
	// DuplicateWindow of the inbound and memory streams: a platform event
	// delivered twice within it (a webhook retried, a poller restarted) is
	// stored once. The server keeps every message id published within the
	// window in memory (about 90 bytes each), so it costs memory in
	// proportion to the message rate.
	DuplicateWindow time.Duration
	// ReplayWindow is the duplicate window of the outbound and history
	// streams. Their ids are the fleet's own (reply and turn ids), and a
	// duplicate comes only from a worker replaying a turn it or a crashed
	// worker already committed, which happens within a lease TTL or an ack
	// wait, so it is shorter than DuplicateWindow.
	ReplayWindow time.Duration
	// OutboundMaxAge bounds how long undelivered replies are kept.
	OutboundMaxAge time.Duration
	// DeadLetterMaxAge bounds how long dead letters are kept.
	DeadLetterMaxAge time.Duration
	// LeaseTTL is how long a session lease lives without renewal.
	LeaseTTL time.Duration
	// MaxMsgSize bounds an envelope; attachments go to the object store.
	MaxMsgSize int32
	// CheckpointMarkerTTL is how long the marker of a cleared turn
	// checkpoint stays: without an end, every session that ever ran a turn
	// would keep one in the server's subject index.
	CheckpointMarkerTTL time.Duration
}

// DefaultLayout is the layout of a single-server fleet.
func DefaultLayout() Layout {
	return Layout{
		Replicas:         1,
		DuplicateWindow:  10 * time.Minute,
		ReplayWindow:     2 * time.Minute,
		OutboundMaxAge:   7 * 24 * time.Hour,
		DeadLetterMaxAge: 30 * 24 * time.Hour,
		LeaseTTL:         30 * time.Second,
		MaxMsgSize:       4 << 20,
		// Nothing reads a cleared checkpoint's marker; a minute is the
		// server's floor (1 s) with room for a clock step.
		CheckpointMarkerTTL: time.Minute,
	}
}

// Validate reports the first invalid field.
func (l Layout) Validate() error {
	switch {
	case l.Replicas < 1 || l.Replicas > 5:
		return config.Invalid("nats.replicas", "%d not in 1..5", l.Replicas)
	case l.DuplicateWindow <= 0:
		return config.Invalid("nats.duplicateWindowSeconds", "must be positive")
	case l.LeaseTTL < time.Second:
		return config.Invalid("nats.leaseTtlSeconds", "%s is below 1s", l.LeaseTTL)
	case l.CheckpointMarkerTTL < time.Second:
		return fmt.Errorf("checkpoint marker TTL: %s is below 1s", l.CheckpointMarkerTTL)
	case l.ReplayWindow < 2*l.LeaseTTL:
		return config.Invalid("nats.replayWindowSeconds", "%s is below twice the lease TTL %s", l.ReplayWindow, l.LeaseTTL)
	}
	return nil
}

// Bucket names (without the fleet prefix) of the fleet's KV buckets.
const (
	BucketLeases      = "leases"
	BucketSessions    = "sessions"
	BucketCheckpoints = "checkpoints"
	BucketProfile     = "profile"
	BucketMemory      = "memory"
	BucketBlobs       = "blobs"
)

// Provision creates or updates every stream and bucket of the fleet. It is
// safe to call from every service at every start.
func Provision(ctx context.Context, b *Bus, l Layout) error {
	if err := l.Validate(); err != nil {
		return err
	}
	s := b.Space
	streams := []jetstream.StreamConfig{
		{
			Name:        s.InboundStream(),
			Description: "inbound messages waiting for a worker",
			Subjects:    []string{s.InboundAll()},
			Retention:   jetstream.WorkQueuePolicy,
			Duplicates:  l.DuplicateWindow,
			MaxMsgSize:  l.MaxMsgSize,
			AllowDirect: true,
			Replicas:    l.Replicas,
			Storage:     jetstream.FileStorage,
		},
		{
			Name:        s.OutboundStream(),
			Description: "replies waiting for their channel",
			Subjects:    []string{s.OutboundAll()},
			Retention:   jetstream.LimitsPolicy,
			Duplicates:  l.ReplayWindow,
			MaxAge:      l.OutboundMaxAge,
			MaxMsgSize:  l.MaxMsgSize,
			AllowDirect: true,
			Replicas:    l.Replicas,
			Storage:     jetstream.FileStorage,
		},
		{
			Name:        s.HistoryStream(),
			Description: "session turn records",
			Subjects:    []string{s.HistoryAll()},
			Retention:   jetstream.LimitsPolicy,
			Duplicates:  l.ReplayWindow,
			MaxMsgSize:  l.MaxMsgSize,
			AllowDirect: true,
			Replicas:    l.Replicas,
			Storage:     jetstream.FileStorage,
		},
		{
			Name:        s.DeadLetterStream(),
			Description: "messages the fleet gave up on, with reasons",
			Subjects:    []string{s.DeadLetterAll()},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      l.DeadLetterMaxAge,
			AllowDirect: true,
			Replicas:    l.Replicas,
			Storage:     jetstream.FileStorage,
		},
		{
			Name:        s.MemoryStream(),
			Description: "consolidation requests waiting for a memory-consolidator",
			Subjects:    []string{s.ConsolidateAll()},
			Retention:   jetstream.WorkQueuePolicy,
			Duplicates:  l.DuplicateWindow,
			MaxMsgSize:  l.MaxMsgSize,
			Replicas:    l.Replicas,
			Storage:     jetstream.FileStorage,
		},
	}
	for _, cfg := range streams {
		if _, err := b.JS.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("provision stream %s: %w", cfg.Name, err)
		}
	}
	buckets := []jetstream.KeyValueConfig{
		{Bucket: s.Bucket(BucketLeases), Description: "session leases: one turn at a time per session", TTL: l.LeaseTTL, History: 1},
		{Bucket: s.Bucket(BucketSessions), Description: "session metadata", History: 1},
		{Bucket: s.Bucket(BucketCheckpoints), Description: "turns in progress", History: 1, LimitMarkerTTL: l.CheckpointMarkerTTL},
		{Bucket: s.Bucket(BucketProfile), Description: "agent profile: bootstrap files and skills", History: 5},
		{Bucket: s.Bucket(BucketMemory), Description: "long-term memory per scope", History: 16},
	}
	for _, cfg := range buckets {
		cfg.Replicas = l.Replicas
		cfg.Storage = jetstream.FileStorage
		if _, err := b.JS.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
			return fmt.Errorf("provision bucket %s: %w", cfg.Bucket, err)
		}
	}
	obj := jetstream.ObjectStoreConfig{
		Bucket:      s.Bucket(BucketBlobs),
		Description: "attachments and oversize tool output",
		Replicas:    l.Replicas,
		Storage:     jetstream.FileStorage,
	}
	if _, err := b.JS.CreateOrUpdateObjectStore(ctx, obj); err != nil {
		return fmt.Errorf("provision object store %s: %w", obj.Bucket, err)
	}
	return nil
}

// KV opens one of the fleet's buckets by its short name (e.g. [BucketLeases]).
func (b *Bus) KV(ctx context.Context, name string) (jetstream.KeyValue, error) {
	kv, err := b.JS.KeyValue(ctx, b.Space.Bucket(name))
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", b.Space.Bucket(name), err)
	}
	return kv, nil
}

// Blobs opens the fleet's object store.
func (b *Bus) Blobs(ctx context.Context) (jetstream.ObjectStore, error) {
	os, err := b.JS.ObjectStore(ctx, b.Space.Bucket(BucketBlobs))
	if err != nil {
		return nil, fmt.Errorf("open object store: %w", err)
	}
	return os, nil
}
