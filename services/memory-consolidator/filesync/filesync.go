// Package filesync keeps the workspace's MEMORY.md, SOUL.md and USER.md
// and their copies in JetStream (the agent scope's memory document and the
// profile bucket) the same, in both directions, without losing an edit on
// either side.
//
// For each pair the syncer remembers the content hash of the file and the
// KV revision it last saw in sync (in memory/.nanofleet-sync.json of the
// workspace, so a restart knows which side moved while it was down). On
// each poll (and at once when the KV entry changes):
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
package filesync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/profile"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Pair is a workspace file and its copy in JetStream: a scope's memory
// document (Scope set) or a profile bucket key.
type Pair struct {
	Path       string
	Name       string
	Scope      *memory.Scope
	ProfileKey string
}

// Config says what to sync.
type Config struct {
	Workspace string
	Agent     string
	// Poll is how often the files are looked at.
	Poll time.Duration
	// StateFile keeps the last synced hashes and revisions; default
	// <workspace>/memory/.nanofleet-sync.json.
	StateFile string
	// Pairs default to DefaultPairs.
	Pairs []Pair
}

// DefaultPairs are nanobot's editable files: memory/MEMORY.md (the agent
// scope's memory), SOUL.md and USER.md.
func DefaultPairs(workspace, agent string) []Pair {
	sc := memory.AgentScope(agent)
	return []Pair{
		{Path: filepath.Join(workspace, "memory", "MEMORY.md"), Name: "MEMORY.md", Scope: &sc},
		{Path: filepath.Join(workspace, "SOUL.md"), Name: "SOUL.md", ProfileKey: profile.FileKey(agent, "SOUL.md")},
		{Path: filepath.Join(workspace, "USER.md"), Name: "USER.md", ProfileKey: profile.FileKey(agent, "USER.md")},
	}
}

type pairState struct {
	Hash string `json:"hash"`
	Rev  uint64 `json:"rev"`
}

// Syncer syncs the pairs.
type Syncer struct {
	cfg     Config
	log     *slog.Logger
	docs    *memory.Docs
	profile jetstream.KeyValue
	revs    *memory.Revisions

	mu    sync.Mutex
	state map[string]pairState
}

// New returns a syncer; memory.Provision must have run.
func New(ctx context.Context, b *bus.Bus, cfg Config, log *slog.Logger) (*Syncer, error) {
	if cfg.Workspace == "" || cfg.Agent == "" || log == nil {
		return nil, errors.New("filesync: workspace, agent and log are required")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.StateFile == "" {
		cfg.StateFile = filepath.Join(cfg.Workspace, "memory", ".nanofleet-sync.json")
	}
	if cfg.Pairs == nil {
		cfg.Pairs = DefaultPairs(cfg.Workspace, cfg.Agent)
	}
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
	s := &Syncer{cfg: cfg, log: log, docs: docs, profile: prof, revs: revs, state: map[string]pairState{}}
	if data, err := os.ReadFile(cfg.StateFile); err == nil {
		if err := json.Unmarshal(data, &s.state); err != nil {
			log.Warn("filesync: unreadable state file; starting fresh", "file", cfg.StateFile, "err", err)
			s.state = map[string]pairState{}
		}
	}
	return s, nil
}

// Run syncs every Poll and whenever a KV copy changes, until ctx ends.
func (s *Syncer) Run(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	for _, p := range s.cfg.Pairs {
		// A cluster electing leaders delays the sync; it does not stop
		// the service.
		var w jetstream.KeyWatcher
		err := bus.Retry(ctx, bus.Backoff{}, func(ctx context.Context) error {
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
		go func() {
			defer func() { _ = w.Stop() }()
			for e := range w.Updates() {
				if e == nil {
					continue
				}
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}()
	}
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		if err := s.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("filesync", "err", err)
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
		changed = changed || c
	}
	if changed {
		if err := s.saveState(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// kvCopy is the JetStream side of a pair.
type kvCopy struct {
	content string
	rev     uint64
	at      time.Time
	exists  bool
	doc     *nanofleetv1.MemoryDoc
}

func (s *Syncer) syncPair(ctx context.Context, p Pair) (bool, error) {
	st := s.state[p.Path]
	data, ferr := os.ReadFile(p.Path)
	fexists := ferr == nil
	if ferr != nil && !errors.Is(ferr, os.ErrNotExist) {
		return false, ferr
	}
	var fmod time.Time
	if fi, err := os.Stat(p.Path); err == nil {
		fmod = fi.ModTime()
	}
	fc := string(data)
	k, err := s.read(ctx, p)
	if err != nil {
		return false, err
	}
	fh := hash(fc)
	fileChanged := fexists && fh != st.Hash
	kvChanged := k.exists && k.rev != st.Rev
	switch {
	case !fexists && !k.exists:
		return false, nil
	case fexists && k.exists && fh == hash(k.content):
		if st.Hash == fh && st.Rev == k.rev {
			return false, nil
		}
		s.state[p.Path] = pairState{Hash: fh, Rev: k.rev}
		return true, nil
	case fexists && !k.exists, fileChanged && !kvChanged:
		return s.toKV(ctx, p, k, fc, fh)
	case !fexists, kvChanged && !fileChanged:
		return s.toFile(p, k, data, fexists)
	}
	// Both sides moved to different contents: the newer wins, the other
	// is kept as a revision.
	if fmod.After(k.at) {
		s.log.Info("filesync: both sides changed; the file is newer", "file", p.Path)
		if err := s.keep(ctx, p, k.content, fc); err != nil {
			return false, err
		}
		return s.toKV(ctx, p, k, fc, fh)
	}
	s.log.Info("filesync: both sides changed; JetStream is newer", "file", p.Path)
	if err := s.keep(ctx, p, fc, k.content); err != nil {
		return false, err
	}
	return s.toFile(p, k, data, fexists)
}

func (s *Syncer) read(ctx context.Context, p Pair) (kvCopy, error) {
	if p.Scope != nil {
		e, err := s.docs.Entry(ctx, *p.Scope)
		if errors.Is(err, memory.ErrNotFound) {
			return kvCopy{doc: &nanofleetv1.MemoryDoc{}}, nil
		}
		if err != nil {
			return kvCopy{}, err
		}
		doc := &nanofleetv1.MemoryDoc{}
		if err := proto.Unmarshal(e.Value(), doc); err != nil {
			return kvCopy{}, fmt.Errorf("decode memory: %w", err)
		}
		return kvCopy{content: doc.GetContent(), rev: e.Revision(), at: e.Created(), exists: true, doc: doc}, nil
	}
	e, err := s.profile.Get(ctx, p.ProfileKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return kvCopy{}, nil
	}
	if err != nil {
		return kvCopy{}, fmt.Errorf("read %s: %w", p.ProfileKey, err)
	}
	return kvCopy{content: string(e.Value()), rev: e.Revision(), at: e.Created(), exists: true}, nil
}

// toKV writes the file's content to JetStream by compare-and-set on the
// revision read; a conflict waits for the next round.
func (s *Syncer) toKV(ctx context.Context, p Pair, k kvCopy, content, h string) (bool, error) {
	var rev uint64
	var err error
	if p.Scope != nil {
		next := proto.Clone(k.doc).(*nanofleetv1.MemoryDoc)
		next.Content = content
		next.UpdatedBy = memory.RevisionSync
		next.UpdatedAt = timestamppb.Now()
		rev, err = s.docs.Put(ctx, *p.Scope, next, k.rev)
	} else {
		if k.exists {
			rev, err = s.profile.Update(ctx, p.ProfileKey, []byte(content), k.rev)
		} else {
			rev, err = s.profile.Create(ctx, p.ProfileKey, []byte(content))
		}
		if errors.Is(err, jetstream.ErrKeyExists) {
			err = memory.ErrConflict
		}
	}
	if errors.Is(err, memory.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	s.log.Info("filesync: file → JetStream", "file", p.Path, "rev", rev)
	s.state[p.Path] = pairState{Hash: h, Rev: rev}
	return true, nil
}

// toFile writes JetStream's content to the file, unless the file changed
// since it was read.
func (s *Syncer) toFile(p Pair, k kvCopy, read []byte, existed bool) (bool, error) {
	if err := os.MkdirAll(filepath.Dir(p.Path), 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.Path), "."+filepath.Base(p.Path)+".sync-*")
	if err != nil {
		return false, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.WriteString(k.content); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	now, err := os.ReadFile(p.Path)
	if (err == nil) != existed || (err == nil && string(now) != string(read)) {
		return false, nil // edited meanwhile: the next round sees it
	}
	if err := os.Rename(tmp.Name(), p.Path); err != nil {
		return false, err
	}
	s.log.Info("filesync: JetStream → file", "file", p.Path, "rev", k.rev)
	s.state[p.Path] = pairState{Hash: hash(k.content), Rev: k.rev}
	return true, nil
}

// keep saves the losing side of a conflict as a revision.
func (s *Syncer) keep(ctx context.Context, p Pair, loser, winner string) error {
	sc := memory.AgentScope(s.cfg.Agent)
	change := &nanofleetv1.FileChange{Bucket: memory.ChangeProfile, Key: p.ProfileKey, Name: p.Name, Before: loser, After: winner}
	if p.Scope != nil {
		sc = *p.Scope
		change.Bucket, change.Key = memory.ChangeMemory, memory.DocKey(sc)
	}
	_, err := s.revs.Append(ctx, &nanofleetv1.MemoryRevision{
		Agent: s.cfg.Agent, Scope: sc.Key(), Kind: memory.RevisionSync,
		Summary: fmt.Sprintf("%s was edited in the workspace and in JetStream; the newer edit was kept, the other is this revision's earlier content", p.Name),
		Changes: []*nanofleetv1.FileChange{change},
	}, "")
	return err
}

func (s *Syncer) saveState() error {
	data, err := json.MarshalIndent(s.state, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.cfg.StateFile), 0o755); err != nil {
		return err
	}
	tmp := s.cfg.StateFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.cfg.StateFile)
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
