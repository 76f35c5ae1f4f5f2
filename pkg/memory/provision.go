package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// Provision creates or updates the memory streams (history log, revisions,
// system jobs). Like [bus.Provision] it is idempotent and safe to call from
// every service at every start; the bus layout must be provisioned too.
func Provision(ctx context.Context, b *bus.Bus, l bus.Layout) error {
	if err := l.Validate(); err != nil {
		return err
	}
	n := NamesOf(b.Space)
	streams := []jetstream.StreamConfig{
		{
			Name:        n.LogStream(),
			Description: "memory history log: consolidated turns per scope and session",
			Subjects:    []string{n.LogAll()},
			Retention:   jetstream.LimitsPolicy,
			Duplicates:  l.DuplicateWindow,
			MaxMsgSize:  l.MaxMsgSize,
			AllowDirect: true,
			Replicas:    l.Replicas,
			Storage:     jetstream.FileStorage,
		},
		{
			Name:        n.RevisionStream(),
			Description: "memory revisions: what Dream, restores and the workspace sync changed",
			Subjects:    []string{n.RevisionAll()},
			Retention:   jetstream.LimitsPolicy,
			Duplicates:  l.DuplicateWindow,
			MaxMsgSize:  l.MaxMsgSize,
			AllowDirect: true,
			Replicas:    l.Replicas,
			Storage:     jetstream.FileStorage,
		},
		{
			Name:        n.JobStream(),
			Description: "memory system jobs (Dream): schedules and their fires",
			Subjects:    []string{n.JobAll()},
			Retention:   jetstream.LimitsPolicy,
			// One schedule per job; fires roll up, so only the newest waits.
			MaxMsgsPerSubject: 1,
			AllowMsgSchedules: true,
			AllowRollup:       true,
			DenyDelete:        true,
			AllowDirect:       true,
			Replicas:          l.Replicas,
			Storage:           jetstream.FileStorage,
		},
	}
	for _, cfg := range streams {
		if _, err := b.JS.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("provision stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// checkProvisioned reports ErrNotProvisioned when a memory stream is
// missing.
func checkProvisioned(ctx context.Context, b *bus.Bus) error {
	n := NamesOf(b.Space)
	for _, name := range []string{n.LogStream(), n.RevisionStream()} {
		if _, err := b.JS.Stream(ctx, name); err != nil {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("%w: stream %s (call memory.Provision)", ErrNotProvisioned, name)
			}
			return fmt.Errorf("memory: stream %s: %w", name, err)
		}
	}
	return nil
}
