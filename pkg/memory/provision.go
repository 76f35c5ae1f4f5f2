package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// Assets declares the memory streams (history log, revisions, system
// jobs) for [bus.Provision].
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	n := NamesOf(sp)
	return bus.Assets{Streams: []jetstream.StreamConfig{
		{
			Name:        n.LogStream(),
			Description: "memory history log: consolidated turns per scope and session",
			Subjects:    []string{n.LogAll()},
			Retention:   jetstream.LimitsPolicy,
			Duplicates:  l.DuplicateWindow,
			MaxMsgSize:  l.MaxMsgSize,
			AllowDirect: true,
		},
		{
			Name:        n.RevisionStream(),
			Description: "memory revisions: what Dream, restores and the workspace sync changed",
			Subjects:    []string{n.RevisionAll()},
			Retention:   jetstream.LimitsPolicy,
			Duplicates:  l.DuplicateWindow,
			MaxMsgSize:  l.MaxMsgSize,
			AllowDirect: true,
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
		},
	}}
}

// checkProvisioned reports ErrNotProvisioned when a memory stream is
// missing.
func checkProvisioned(ctx context.Context, b *bus.Bus) error {
	n := NamesOf(b.Space)
	for _, name := range []string{n.LogStream(), n.RevisionStream()} {
		if _, err := b.JS.Stream(ctx, name); err != nil {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("%w: stream %s (provision memory.Assets)", ErrNotProvisioned, name)
			}
			return fmt.Errorf("memory: stream %s: %w", name, err)
		}
	}
	return nil
}
