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
	// BlobsMaxBytes (0: none) and BlobsMaxAge bound the object store of
	// attachments and oversize tool output: a model can fill it at will
	// (read_file of a 20 MiB image, many times a turn), and nothing else
	// removes what is stored there. JetStream reserves BlobsMaxBytes of
	// the server's store, so it must fit there.
	BlobsMaxBytes int64
	BlobsMaxAge   time.Duration
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
		BlobsMaxAge:      7 * 24 * time.Hour,
		// Nothing reads a cleared checkpoint's marker; a minute is the
		// server's floor (1 s) with room for a clock step.
		CheckpointMarkerTTL: time.Minute,
	}
}

// MinWindow is the shortest duplicate window a stream may have
// ([config.MinWindowSeconds]): longer than [ResendSpan], so that every
// resend of a publish is recognised.
const MinWindow = config.MinWindowSeconds * time.Second

// Fails to compile unless MinWindow is longer than ResendSpan.
const _ = uint64(MinWindow - ResendSpan - 1)

// Validate reports every invalid field: by its key in the config file,
// checked by the file's own rules ([config.LayoutLimits.Check]), or, for one
// code sets, by its name.
func (l Layout) Validate() error {
	var p config.Problems
	config.LayoutLimits{
		Replicas:               l.Replicas,
		LeaseTTLSeconds:        l.LeaseTTL.Seconds(),
		DuplicateWindowSeconds: l.DuplicateWindow.Seconds(),
		ReplayWindowSeconds:    l.ReplayWindow.Seconds(),
	}.Check(&p)
	if l.CheckpointMarkerTTL < time.Second {
		p.Join(fmt.Errorf("checkpoint marker TTL: %s is below 1s", l.CheckpointMarkerTTL))
	}
	if l.BlobsMaxBytes < 0 {
		p.Add("nats.blobsMaxMB", "must not be negative")
	}
	return p.Err()
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
