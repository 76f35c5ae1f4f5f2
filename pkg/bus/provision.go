package bus

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// Assets are streams, KV buckets and object stores of the fleet's
// JetStream layout. Names are full (with the fleet's prefix). Replicas are
// left unset: [Provision] gives every asset the layout's.
type Assets struct {
	Streams []jetstream.StreamConfig
	Buckets []jetstream.KeyValueConfig
	Objects []jetstream.ObjectStoreConfig
}

// Declare is how a package declares the assets it owns, for a fleet's
// subject space and layout. Each package that keeps state in JetStream
// exports one (e.g. memory.Assets), and each service passes the ones it
// uses to [Provision]; nothing else creates streams or buckets.
type Declare func(subject.Space, Layout) Assets

// Bucket names (without the fleet prefix) of the core KV buckets.
const (
	BucketLeases      = "leases"
	BucketSessions    = "sessions"
	BucketCheckpoints = "checkpoints"
	BucketProfile     = "profile"
	BucketMemory      = "memory"
	BucketBlobs       = "blobs"
)

// CoreAssets declares the streams and buckets every part of the fleet
// uses: inbound, outbound, history, dead letters, consolidation requests,
// leases, sessions, checkpoints, profile, memory and blobs. [Provision]
// always includes them.
func CoreAssets(s subject.Space, l Layout) Assets {
	return Assets{
		Streams: []jetstream.StreamConfig{
			{
				Name:        s.InboundStream(),
				Description: "inbound messages waiting for a worker",
				Subjects:    []string{s.InboundAll()},
				Retention:   jetstream.WorkQueuePolicy,
				Duplicates:  l.DuplicateWindow,
				MaxMsgSize:  l.MaxMsgSize,
				AllowDirect: true,
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
			},
			{
				Name:        s.HistoryStream(),
				Description: "session turn records",
				Subjects:    []string{s.HistoryAll()},
				Retention:   jetstream.LimitsPolicy,
				Duplicates:  l.ReplayWindow,
				MaxMsgSize:  l.MaxMsgSize,
				AllowDirect: true,
			},
			{
				Name:        s.DeadLetterStream(),
				Description: "messages the fleet gave up on, with reasons",
				Subjects:    []string{s.DeadLetterAll()},
				Retention:   jetstream.LimitsPolicy,
				MaxAge:      l.DeadLetterMaxAge,
				AllowDirect: true,
			},
			{
				Name:        s.MemoryStream(),
				Description: "consolidation requests waiting for a memory-consolidator",
				Subjects:    []string{s.ConsolidateAll()},
				Retention:   jetstream.WorkQueuePolicy,
				Duplicates:  l.DuplicateWindow,
				MaxMsgSize:  l.MaxMsgSize,
			},
		},
		Buckets: []jetstream.KeyValueConfig{
			{Bucket: s.Bucket(BucketLeases), Description: "leases: one turn at a time per session, one consolidation at a time per session and per memory document", TTL: l.LeaseTTL, History: 1},
			{Bucket: s.Bucket(BucketSessions), Description: "session metadata", History: 1},
			{Bucket: s.Bucket(BucketCheckpoints), Description: "turns in progress", History: 1, LimitMarkerTTL: l.CheckpointMarkerTTL},
			{Bucket: s.Bucket(BucketProfile), Description: "agent profile: bootstrap files and skills", History: 5},
			{Bucket: s.Bucket(BucketMemory), Description: "long-term memory per scope", History: 16},
		},
		Objects: []jetstream.ObjectStoreConfig{
			{Bucket: s.Bucket(BucketBlobs), Description: "attachments and oversize tool output", MaxBytes: l.BlobsMaxBytes, TTL: l.BlobsMaxAge},
		},
	}
}

// Join declares the assets of every one of decls, in order: a service or
// a package made of parts declares its assets as the join of theirs.
func Join(decls ...Declare) Declare {
	return func(s subject.Space, l Layout) Assets {
		var all Assets
		for _, d := range decls {
			a := d(s, l)
			all.Streams = append(all.Streams, a.Streams...)
			all.Buckets = append(all.Buckets, a.Buckets...)
			all.Objects = append(all.Objects, a.Objects...)
		}
		return all
	}
}

// KeyValue declares one KV bucket, cfg naming it by its short name (the
// fleet's prefix is added): what a package owning a single bucket
// declares.
func KeyValue(cfg jetstream.KeyValueConfig) Declare {
	return func(s subject.Space, _ Layout) Assets {
		c := cfg
		c.Bucket = s.Bucket(cfg.Bucket)
		return Assets{Buckets: []jetstream.KeyValueConfig{c}}
	}
}

// Declared is the layout's core assets and those of decls, with the
// layout's replicas and file storage, in declaration order. An asset
// declared twice the same way (two services of one process sharing a
// package) is kept once; declared twice differently, it is an error
// wrapping [ErrLayout], since two packages would fight over its settings.
func Declared(s subject.Space, l Layout, decls ...Declare) (Assets, error) {
	all := Join(append([]Declare{CoreAssets}, decls...)...)(s, l)
	for i := range all.Streams {
		all.Streams[i].Replicas = l.Replicas
		all.Streams[i].Storage = jetstream.FileStorage
	}
	for i := range all.Buckets {
		all.Buckets[i].Replicas = l.Replicas
		all.Buckets[i].Storage = jetstream.FileStorage
	}
	for i := range all.Objects {
		all.Objects[i].Replicas = l.Replicas
		all.Objects[i].Storage = jetstream.FileStorage
	}
	var err error
	if all.Streams, err = once(all.Streams, func(c jetstream.StreamConfig) string { return c.Name }); err != nil {
		return Assets{}, err
	}
	if all.Buckets, err = once(all.Buckets, func(c jetstream.KeyValueConfig) string { return c.Bucket }); err != nil {
		return Assets{}, err
	}
	if all.Objects, err = once(all.Objects, func(c jetstream.ObjectStoreConfig) string { return c.Bucket }); err != nil {
		return Assets{}, err
	}
	return all, nil
}

// once drops repeated declarations of an asset, and reports one
// declared with different settings.
func once[C any](cs []C, name func(C) string) ([]C, error) {
	var out []C
	seen := map[string]C{}
	for _, c := range cs {
		n := name(c)
		prev, ok := seen[n]
		if !ok {
			seen[n] = c
			out = append(out, c)
			continue
		}
		if !reflect.DeepEqual(prev, c) {
			return nil, fmt.Errorf("%w: %s declared twice with different settings", ErrLayout, n)
		}
	}
	return out, nil
}

// Asset names one declared asset.
type Asset struct {
	// Kind is "stream", "bucket" or "object store".
	Kind string
	// Name is the asset's name: the stream's, or the bucket's.
	Name string
	// Stream is the JetStream stream that holds it: Name for a stream,
	// KV_<name> for a bucket, OBJ_<name> for an object store.
	Stream string
}

// List names every asset of a, streams first.
func (a Assets) List() []Asset {
	var out []Asset
	for _, c := range a.Streams {
		out = append(out, Asset{Kind: "stream", Name: c.Name, Stream: c.Name})
	}
	for _, c := range a.Buckets {
		out = append(out, Asset{Kind: "bucket", Name: c.Bucket, Stream: "KV_" + c.Bucket})
	}
	for _, c := range a.Objects {
		out = append(out, Asset{Kind: "object store", Name: c.Bucket, Stream: "OBJ_" + c.Bucket})
	}
	return out
}

// Provision creates or updates the core assets and those of decls, every
// one with the layout's replicas. It is idempotent and meant for the
// fleet's services at start-up; a client that only talks to a running
// fleet calls [CheckLayout] instead, so that its own config never changes
// the fleet's layout.
func Provision(ctx context.Context, b *Bus, l Layout, decls ...Declare) error {
	if err := l.Validate(); err != nil {
		return err
	}
	all, err := Declared(b.Space, l, decls...)
	if err != nil {
		return err
	}
	// Each call has its own deadline: one lost with a server that died,
	// or sent while the cluster has no leader, fails and the caller
	// retries; a retry finds done what the server finished meanwhile.
	call := func(what, name string, do func(context.Context) error) func() error {
		return func() error {
			cctx, cancel := context.WithTimeout(ctx, CallTimeout)
			defer cancel()
			if err := do(cctx); err != nil {
				return fmt.Errorf("provision %s %s: %w", what, name, err)
			}
			return nil
		}
	}
	// Each phase's requests go out together: one at a time, the
	// twenty-odd assets' two or three requests each took a one-shot
	// `agent -m` 29 ms on a new store and 15 ms on an existing one, at
	// most eight at a time 21 and 9 (medians of 20 starts). Every check
	// ends before any asset is created or changed.
	var checks errgroup.Group
	checks.SetLimit(provisionParallel)
	for _, a := range all.List() {
		checks.Go(call(a.Kind, a.Name, func(ctx context.Context) error {
			return keepsReplicas(ctx, b, a, l.Replicas)
		}))
	}
	if err := checks.Wait(); err != nil {
		return err
	}
	var creates errgroup.Group
	creates.SetLimit(provisionParallel)
	for _, cfg := range all.Streams {
		creates.Go(call("stream", cfg.Name, func(ctx context.Context) error {
			_, err := b.JS.CreateOrUpdateStream(ctx, cfg)
			return err
		}))
	}
	for _, cfg := range all.Buckets {
		creates.Go(call("bucket", cfg.Bucket, func(ctx context.Context) error {
			_, err := b.JS.CreateOrUpdateKeyValue(ctx, cfg)
			return err
		}))
	}
	for _, cfg := range all.Objects {
		creates.Go(call("object store", cfg.Bucket, func(ctx context.Context) error {
			_, err := b.JS.CreateOrUpdateObjectStore(ctx, cfg)
			return err
		}))
	}
	return creates.Wait()
}

// provisionParallel bounds the requests Provision has under way at once.
const provisionParallel = 8

// keepsReplicas refuses to lower an existing asset's replicas. Lowering
// them is what a service started with the default nats.replicas of 1 did
// to a cluster's R3 fleet, silently: the fleet then lost what the one
// node holding a stream kept when it went down, and each service started
// since set them again to its own count. Raising them is left to Provision.
func keepsReplicas(ctx context.Context, b *Bus, a Asset, want int) error {
	s, err := b.JS.Stream(ctx, a.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if r := s.CachedInfo().Config.Replicas; r > want {
		return config.Invalid("nats.replicas", "%w: %d would lower %s %s from its %d replicas: set nats.replicas to %d as the fleet's other services have it (to scale the fleet down, lower the replicas of its streams with the nats CLI first)",
			ErrLayout, want, a.Kind, a.Name, r, r)
	}
	return nil
}

// Difference is one way the fleet's layout differs from a declared one.
type Difference struct {
	Asset Asset
	// Missing is true when the asset does not exist.
	Missing bool
	// Replicas is the asset's replica count, Want the declared one.
	Replicas, Want int
}

func (d Difference) String() string {
	if d.Missing {
		return fmt.Sprintf("%s %s is missing", d.Asset.Kind, d.Asset.Name)
	}
	return fmt.Sprintf("%s %s has %d replicas, not %d", d.Asset.Kind, d.Asset.Name, d.Replicas, d.Want)
}

// CheckLayout compares the fleet's layout with the declared one (the core
// assets and those of decls) and changes nothing: it is what clients of a
// running fleet do instead of [Provision]. It returns the differences; an
// error only when the server could not be asked.
func CheckLayout(ctx context.Context, b *Bus, l Layout, decls ...Declare) ([]Difference, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	all, err := Declared(b.Space, l, decls...)
	if err != nil {
		return nil, err
	}
	// As in Provision, the requests go out together; found keeps the
	// assets' order.
	assets := all.List()
	found := make([]*Difference, len(assets))
	var g errgroup.Group
	g.SetLimit(provisionParallel)
	for i, a := range assets {
		g.Go(func() error {
			s, err := b.JS.Stream(ctx, a.Stream)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				found[i] = &Difference{Asset: a, Missing: true, Want: l.Replicas}
				return nil
			}
			if err != nil {
				return fmt.Errorf("check %s %s: %w", a.Kind, a.Name, err)
			}
			if r := s.CachedInfo().Config.Replicas; r != l.Replicas {
				found[i] = &Difference{Asset: a, Replicas: r, Want: l.Replicas}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var diffs []Difference
	for _, d := range found {
		if d != nil {
			diffs = append(diffs, *d)
		}
	}
	return diffs, nil
}
