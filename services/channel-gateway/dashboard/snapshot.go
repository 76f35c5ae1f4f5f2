package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// buildTimeout bounds one snapshot's requests.
const buildTimeout = 5 * time.Second

// statusTimeout is the part of buildTimeout the fleet's status may take
// (more when discovery is told to wait longer).
// A stream whose leader was killed answers nobody for seconds; given the
// whole build time, its read left none for the history and dead-letter
// reads after it, which then failed too.
const statusTimeout = 2 * time.Second

// usageTop is how many models, users and sessions the usage lists.
const usageTop = 5

// Snapshot is what the page shows at one moment; its JSON form is what
// /dashboard/api/snapshot returns and the live socket pushes.
type Snapshot struct {
	At time.Time `json:"at"`
	// Workers and ToolRunners count the instances that answered discovery.
	Workers     int `json:"workers"`
	ToolRunners int `json:"tool_runners"`
	// TurnsInFlight are inbound messages delivered to a worker and not yet
	// acked (the workers consumer's ack-pending count); Queued are those
	// no worker has fetched yet.
	TurnsInFlight int    `json:"turns_in_flight"`
	Queued        uint64 `json:"queued"`
	// DeadLetterCount is the number of dead letters kept.
	DeadLetterCount uint64                `json:"dead_letter_count"`
	Services        []fleetstatus.Service `json:"services"`
	Streams         []StreamLag           `json:"streams"`
	// Turns and DeadLetters are the most recent, newest first.
	Turns       []fleetstatus.Turn       `json:"turns"`
	DeadLetters []fleetstatus.DeadLetter `json:"dead_letters"`
	// Usage is the token usage of the turns in the history, in total and
	// for the top models, users and sessions.
	Usage fleetstatus.UsageSummary `json:"usage"`
	// Channels are the channels' states as the running gateways
	// reported them, merged (status.Board.Channels).
	Channels []status.Channel `json:"channels"`
	// Problems are what could not be read for this snapshot.
	Problems []string `json:"problems"`
}

// StreamLag is one stream with its consumers' backlog.
type StreamLag struct {
	fleetstatus.Stream
	Consumers []fleetstatus.Consumer `json:"consumers"`
}

// Snapshot returns a snapshot begun now or later.
func (s *Server) Snapshot(ctx context.Context) (*Snapshot, error) {
	snap, _, err := s.snaps.get(ctx, s.deps.Now())
	return snap, err
}

// snapshotter builds snapshots one at a time and shares them between the
// pages that ask within a short time; it owns the recent records.
type snapshotter struct {
	cfg Config
	bus *bus.Bus
	now func() time.Time

	// sem holds the right to build and to use the fields below.
	sem   chan struct{}
	turns *fleetstatus.Recent[fleetstatus.Turn]
	dead  *fleetstatus.Recent[fleetstatus.DeadLetter]
	usage *fleetstatus.Usage
	board *status.Board // opened at the first snapshot
	last  *Snapshot
	data  []byte // last, encoded
}

func newSnapshotter(cfg Config, b *bus.Bus, now func() time.Time) *snapshotter {
	return &snapshotter{
		cfg: cfg, bus: b, now: now, sem: make(chan struct{}, 1),
		turns: fleetstatus.NewRecentTurns(b.Space, cfg.RecentTurns),
		dead:  fleetstatus.NewRecentDeadLetters(b.Space, cfg.DeadLetters),
		usage: fleetstatus.NewUsage(b.Space),
	}
}

// get returns a snapshot begun at notBefore or later, and its JSON,
// building one when the last is older.
func (s *snapshotter) get(ctx context.Context, notBefore time.Time) (*Snapshot, []byte, error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("dashboard: snapshot: %w", ctx.Err())
	}
	defer func() { <-s.sem }()
	if s.last != nil && !s.last.At.Before(notBefore) {
		return s.last, s.data, nil
	}
	snap := s.build(ctx)
	if err := ctx.Err(); err != nil {
		// The asker left mid-way: do not share what it could not finish.
		return nil, nil, fmt.Errorf("dashboard: snapshot: %w", err)
	}
	data, err := json.Marshal(snap)
	if err != nil {
		return nil, nil, fmt.Errorf("dashboard: encode snapshot: %w", err)
	}
	s.last, s.data = snap, data
	return snap, data, nil
}

// build reads the fleet. What cannot be read is named in Problems; the
// rest of the snapshot is still filled in.
func (s *snapshotter) build(ctx context.Context) *Snapshot {
	snap := &Snapshot{
		At: s.now(), Services: []fleetstatus.Service{}, Streams: []StreamLag{},
		Turns: []fleetstatus.Turn{}, DeadLetters: []fleetstatus.DeadLetter{}, Problems: []string{},
		Channels: []status.Channel{},
	}
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	space := s.bus.Space
	sctx, scancel := context.WithTimeout(ctx, max(statusTimeout, s.cfg.DiscoverWait+time.Second))
	st, err := fleetstatus.Get(sctx, s.bus, s.cfg.DiscoverWait)
	scancel()
	if err != nil {
		snap.Problems = append(snap.Problems, err.Error())
		st = &fleetstatus.Status{}
	}
	for _, u := range st.Unreadable {
		snap.Problems = append(snap.Problems, "no answer from "+u.Stream+": "+u.Err)
	}
	snap.Services = append(snap.Services, st.Services...)
	snap.Workers = st.Online(fleetstatus.WorkerService)
	snap.ToolRunners = st.Online(fleetstatus.ToolRunnerService)
	if c, ok := st.Consumer(space.InboundStream(), space.WorkerConsumer()); ok {
		snap.TurnsInFlight, snap.Queued = c.InFlight, c.Pending
	} else if in, ok := st.Stream(space.InboundStream()); ok {
		snap.Queued = in.Msgs // no worker has ever started
	}
	for _, str := range st.Streams {
		lag := StreamLag{Stream: str, Consumers: []fleetstatus.Consumer{}}
		for _, c := range st.Consumers {
			if c.Stream == str.Name {
				lag.Consumers = append(lag.Consumers, c)
			}
		}
		snap.Streams = append(snap.Streams, lag)
	}
	if hist, ok := st.Stream(space.HistoryStream()); ok {
		if err := s.turns.Update(ctx, s.bus.Direct, hist); err != nil {
			snap.Problems = append(snap.Problems, "recent turns: "+err.Error())
		}
		// The first snapshot reads the whole history for the sums; one
		// cut short by the build timeout goes on in the next.
		if err := s.usage.Update(ctx, s.bus.Direct, hist); err != nil {
			snap.Problems = append(snap.Problems, "token usage: "+err.Error())
		}
	}
	snap.Usage = s.usage.Summary(usageTop)
	snap.Turns = append(snap.Turns, s.turns.Items()...)
	if dlq, ok := st.Stream(space.DeadLetterStream()); ok {
		snap.DeadLetterCount = dlq.Msgs
		if err := s.dead.Update(ctx, s.bus.Direct, dlq); err != nil {
			snap.Problems = append(snap.Problems, "dead letters: "+err.Error())
		}
	}
	snap.DeadLetters = append(snap.DeadLetters, s.dead.Items()...)
	if chans, err := s.channels(ctx, st.Services); err != nil {
		snap.Problems = append(snap.Problems, "channels: "+err.Error())
	} else {
		snap.Channels = append(snap.Channels, chans...)
	}
	return snap
}

// channels reads the status board, counting the records of the gateways
// among svcs (discovered) and those whose lease proves them running.
func (s *snapshotter) channels(ctx context.Context, svcs []fleetstatus.Service) ([]status.Channel, error) {
	if s.board == nil {
		board, err := status.Open(ctx, s.bus)
		if err != nil {
			return nil, err
		}
		s.board = board
	}
	leases, err := s.bus.KV(ctx, bus.BucketLeases)
	if err != nil {
		return nil, err
	}
	return s.board.Channels(ctx, lease.NewTable(leases), svcs, nil)
}
