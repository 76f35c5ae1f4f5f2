// Package filesync keeps the workspace's MEMORY.md, SOUL.md and USER.md
// and their copies in JetStream (the agent scope's memory document and the
// profile bucket) the same, in both directions, without losing an edit on
// either side.
//
// For each pair the syncer remembers the content hash of the file and the
// KV revision it last saw in sync (in memory/.nanofleet-sync.json of the
// workspace, so a restart knows which side moved while it was down). On
// each poll (and at once when the KV entry changes) it reads the file, and
// the KV entry only if its watcher reported a change since the last read
// (every poll without a watcher):
//
//   - only the file changed: the file is written to KV, by compare-and-set
//     on the revision read;
//   - only KV changed: KV is written to the file (atomically, through a
//     temporary file, and only if the file still has the content read);
//   - both changed to different contents: the newer wins on both sides
//     (file modification time against KV entry time) and the other is
//     saved as a "sync" revision, so /dream-restore brings it back;
//   - a deleted file is written again from KV; a deleted KV entry again
//     from the file. Nothing is deleted by the sync.
//
// The profile files (SOUL.md, USER.md and the other bootstrap files) go
// one way only unless the operator made the profile editable
// (tools.workspace.editableProfile): the workspace holds a copy of the
// bucket, rewritten when it differs, and is never read back, so a session
// cannot change what every session's prompt says.
//
// The syncer runs outside the sandbox while sandboxed commands may be
// changing the same workspace, so every access goes through package
// wsfile: beneath the workspace, no symlink followed in any component, no
// hard-linked file read, writes renamed into the directory opened. A
// symlink, hard link or file over 4 MB (maxFileBytes; a sparse one costs
// the sandbox no quota) where a synced file belongs counts as no file: it
// is replaced by JetStream's copy (or left alone when there is none),
// never followed. A symlinked directory on the way (memory -> /elsewhere)
// makes that pair fail with a warning until it is removed.
package filesync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/wsfile"
)

// Pair is a workspace file and its copy in JetStream: a scope's memory
// document (Scope set) or a profile bucket key.
type Pair struct {
	// Rel is the file's path relative to the workspace.
	Rel        string
	Name       string
	Scope      *memory.Scope
	ProfileKey string
	// ReadOnly pairs go from JetStream to the file only: the file is a
	// copy, never read back.
	ReadOnly bool
}

// Config says what to sync.
type Config struct {
	Workspace string
	Agent     string
	// Poll is how often the files are looked at.
	Poll time.Duration
	// StateFile, relative to the workspace, keeps the last synced hashes
	// and revisions; default memory/.nanofleet-sync.json.
	StateFile string
	// EditableProfile syncs SOUL.md and USER.md both ways, as nanobot
	// does (tools.workspace.editableProfile); otherwise every bootstrap
	// file goes from the profile bucket to the workspace only.
	EditableProfile bool
	// Pairs default to DefaultPairs.
	Pairs []Pair
}

// DefaultPairs are memory/MEMORY.md (the agent scope's memory, both
// ways) and the profile's files: SOUL.md and USER.md both ways when the
// profile is editable, every bootstrap file one way otherwise.
func DefaultPairs(agent string, editable bool) []Pair {
	sc := memory.AgentScope(agent)
	pairs := []Pair{{Rel: filepath.Join("memory", "MEMORY.md"), Name: "MEMORY.md", Scope: &sc}}
	if editable {
		for _, name := range []string{"SOUL.md", "USER.md"} {
			pairs = append(pairs, Pair{Rel: name, Name: name, ProfileKey: profile.FileKey(agent, name)})
		}
		return pairs
	}
	for _, name := range profile.BootstrapFiles {
		pairs = append(pairs, Pair{Rel: name, Name: name, ProfileKey: profile.FileKey(agent, name), ReadOnly: true})
	}
	return pairs
}

type pairState struct {
	Hash string `json:"hash"`
	Rev  uint64 `json:"rev"`
}

// Syncer syncs the pairs.
type Syncer struct {
	cfg     Config
	dir     *wsfile.Dir
	log     *slog.Logger
	docs    *memory.Docs
	profile jetstream.KeyValue
	revs    *memory.Revisions

	mu    sync.Mutex
	state map[string]pairState
	// refused holds, per pair, the refusal of its file last warned
	// about: a link a session left where no copy replaces it is warned
	// about once, not on every poll.
	refused map[string]string

	// kept holds, between polls, the KV copy of each pair that Run
	// watches: read on every poll, the bucket's last block (up to 4 MB
	// of the memory document's old revisions) stayed in the server's
	// cache for good, as the poll came back before the cache's 10 s
	// expiry. A pair without a watcher (SyncOnce alone, or a watcher
	// that stopped) is read on every poll.
	keptMu sync.Mutex
	kept   map[string]*keptCopy

	rounds atomic.Uint64 // Run's polls so far, for tests
}

// keptCopy is a pair's KV copy kept between polls.
type keptCopy struct {
	copy    kvCopy
	ok      bool   // copy is current as far as the watcher knows
	gen     uint64 // changes seen: a read that raced one is not kept
	watched bool   // a watcher drops the copy on every change
}

// Option changes an optional setting of [New].
type Option func(*Syncer)

// WithLogger sets the syncer's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(s *Syncer) { s.log = observe.OrDiscard(l) } }

// New returns a syncer. The bus layout and memory.Assets must have been
// provisioned.
func New(ctx context.Context, cfg Config, b *bus.Bus, opts ...Option) (*Syncer, error) {
	if cfg.Workspace == "" || cfg.Agent == "" {
		return nil, errors.New("filesync: workspace and agent are required")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.StateFile == "" {
		cfg.StateFile = filepath.Join("memory", ".nanofleet-sync.json")
	}
	if cfg.Pairs == nil {
		cfg.Pairs = DefaultPairs(cfg.Agent, cfg.EditableProfile)
	}
	if err := os.MkdirAll(cfg.Workspace, 0o755); err != nil {
		return nil, fmt.Errorf("filesync: workspace: %w", err)
	}
	dir, err := wsfile.Open(cfg.Workspace)
	if err != nil {
		return nil, fmt.Errorf("filesync: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			dir.Close()
		}
	}()
	docs, err := memory.OpenDocs(ctx, b)
	if err != nil {
		return nil, err
	}
	prof, err := b.KV(ctx, bus.BucketProfile)
	if err != nil {
		return nil, err
	}
	revs, err := memory.OpenRevisions(ctx, b)
	if err != nil {
		return nil, err
	}
	s := &Syncer{cfg: cfg, dir: dir, log: slog.New(slog.DiscardHandler), docs: docs, profile: prof, revs: revs, state: map[string]pairState{},
		refused: map[string]string{}, kept: map[string]*keptCopy{}}
	for _, o := range opts {
		o(s)
	}
	ok = true
	if data, _, err := dir.ReadFile(cfg.StateFile, 1<<20); err == nil {
		if err := json.Unmarshal(data, &s.state); err != nil {
			s.log.Warn("filesync: unreadable state file; starting fresh", "file", cfg.StateFile, "err", err)
			s.state = map[string]pairState{}
		}
	}
	return s, nil
}

// Close releases the workspace directory.
func (s *Syncer) Close() error { return s.dir.Close() }

// Run syncs every Poll and whenever a KV copy changes, until ctx ends.
func (s *Syncer) Run(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	for _, p := range s.cfg.Pairs {
		// A cluster electing leaders delays the sync; it does not stop
		// the service.
		var w jetstream.KeyWatcher
		err := bus.Retry(ctx, backoff.Backoff{}, func(ctx context.Context) error {
			var err error
			w, err = s.watch(ctx, p)
			return err
		}, func(err error, wait time.Duration) {
			s.log.Warn("filesync: nats not ready; retrying", "err", err, "retry_in", wait)
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		key := s.key(p)
		s.setWatched(key, true)
		go func() {
			defer func() { _ = w.Stop() }()
			defer s.setWatched(key, false)
			for e := range w.Updates() {
				if e == nil {
					continue
				}
				s.forget(key)
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}()
	}
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	// A failure that lasts (a symlinked memory directory, NATS away) is
	// said when it starts and when it ends, not on every poll.
	var failing string
	for {
		err := s.SyncOnce(ctx)
		s.rounds.Add(1)
		switch {
		case ctx.Err() != nil:
		case err != nil && err.Error() != failing:
			s.log.Warn("filesync", "err", err)
			failing = err.Error()
		case err == nil && failing != "":
			s.log.Info("filesync: syncing again")
			failing = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-kick:
		}
	}
}

func (s *Syncer) watch(ctx context.Context, p Pair) (jetstream.KeyWatcher, error) {
	if p.Scope != nil {
		return s.docs.Watch(ctx, *p.Scope)
	}
	w, err := s.profile.Watch(ctx, p.ProfileKey, jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("filesync: watch %s: %w", p.Name, err)
	}
	return w, nil
}

// SyncOnce syncs every pair once.
func (s *Syncer) SyncOnce(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	changed := false
	for _, p := range s.cfg.Pairs {
		c, err := s.syncPair(ctx, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
		if c || err != nil {
			// What this round wrote or failed on is read again, not
			// taken from before the write.
			s.forget(s.key(p))
		}
		changed = changed || c
	}
	if changed {
		if err := s.saveState(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// errChanged cancels a write to a file that changed since it was read.
var errChanged = errors.New("file changed meanwhile")

// maxFileBytes bounds a synced file read from the workspace.
const maxFileBytes = 4 << 20
