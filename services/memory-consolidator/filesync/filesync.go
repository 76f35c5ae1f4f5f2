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
// symlink or hard link where a synced file belongs counts as no file: it
// is replaced by JetStream's copy (or left alone when there is none),
// never followed. A symlinked directory on the way (memory -> /elsewhere)
// makes that pair fail with a warning until it is removed.
package filesync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
	"github.com/nanofleet/nanofleet/pkg/wsfile"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
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
}

// Option changes an optional setting of [New].
type Option func(*Syncer)

// WithLogger sets the syncer's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(s *Syncer) { s.log = l } }

// New returns a syncer; memory.Provision must have run.
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
	s := &Syncer{cfg: cfg, dir: dir, log: slog.New(slog.DiscardHandler), docs: docs, profile: prof, revs: revs, state: map[string]pairState{}}
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

// key names a pair in the state file: its host path, as before pairs
// were relative.
func (s *Syncer) key(p Pair) string { return filepath.Join(s.cfg.Workspace, p.Rel) }

// readFile reads a pair's file; a symlink, hard link or special file in
// its place counts as no file (it is never followed).
func (s *Syncer) readFile(p Pair) (data []byte, mod time.Time, exists bool, err error) {
	data, fi, err := s.dir.ReadFile(p.Rel, maxFileBytes)
	switch {
	case err == nil:
		return data, fi.ModTime(), true, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, time.Time{}, false, nil
	case errors.Is(err, wsfile.ErrSymlink) && !s.parentIsPlain(p):
		return nil, time.Time{}, false, fmt.Errorf("not following a symlinked directory: %w", err)
	case errors.Is(err, wsfile.ErrSymlink), errors.Is(err, wsfile.ErrHardLink), errors.Is(err, wsfile.ErrNotRegular), errors.Is(err, wsfile.ErrTooLarge):
		s.log.Warn("filesync: not a regular file; it is replaced, not followed", "file", p.Rel, "reason", err)
		return nil, time.Time{}, false, nil
	}
	return nil, time.Time{}, false, err
}

// parentIsPlain reports whether every directory on the way to p's file
// is a real directory (the refusal, if any, is about the file itself).
func (s *Syncer) parentIsPlain(p Pair) bool {
	parent := filepath.Dir(p.Rel)
	if parent == "." {
		return true
	}
	fi, err := s.dir.Lstat(parent)
	return err == nil && fi.IsDir()
}

func (s *Syncer) syncPair(ctx context.Context, p Pair) (bool, error) {
	st := s.state[s.key(p)]
	data, fmod, fexists, ferr := s.readFile(p)
	if ferr != nil {
		return false, ferr
	}
	fc := string(data)
	k, err := s.read(ctx, p)
	if err != nil {
		return false, err
	}
	fh := hash(fc)
	if p.ReadOnly {
		// The file is a copy: make it the bucket's content, nothing more.
		if !k.exists || (fexists && fh == hash(k.content)) {
			return false, nil
		}
		if fexists && fh != st.Hash {
			s.log.Warn("filesync: workspace copy of a profile file changed; restoring it (tools.workspace.editableProfile is off)", "file", p.Rel)
		}
		return s.toFile(p, k, data, fexists)
	}
	fileChanged := fexists && fh != st.Hash
	kvChanged := k.exists && k.rev != st.Rev
	switch {
	case !fexists && !k.exists:
		return false, nil
	case fexists && k.exists && fh == hash(k.content):
		if st.Hash == fh && st.Rev == k.rev {
			return false, nil
		}
		s.state[s.key(p)] = pairState{Hash: fh, Rev: k.rev}
		return true, nil
	case fexists && !k.exists, fileChanged && !kvChanged:
		return s.toKV(ctx, p, k, fc, fh)
	case !fexists, kvChanged && !fileChanged:
		return s.toFile(p, k, data, fexists)
	}
	// Both sides moved to different contents: the newer wins, the other
	// is kept as a revision.
	if fmod.After(k.at) {
		s.log.Info("filesync: both sides changed; the file is newer", "file", p.Rel)
		if err := s.keep(ctx, p, k.content, fc); err != nil {
			return false, err
		}
		return s.toKV(ctx, p, k, fc, fh)
	}
	s.log.Info("filesync: both sides changed; JetStream is newer", "file", p.Rel)
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
	s.log.Info("filesync: file → JetStream", "file", p.Rel, "rev", rev)
	s.state[s.key(p)] = pairState{Hash: h, Rev: rev}
	return true, nil
}

// errChanged cancels a write to a file that changed since it was read.
var errChanged = errors.New("file changed meanwhile")

// toFile writes JetStream's content to the file, unless the file changed
// since it was read.
func (s *Syncer) toFile(p Pair, k kvCopy, read []byte, existed bool) (bool, error) {
	err := s.dir.WriteFile(p.Rel, []byte(k.content), wsfile.WriteOptions{Unless: func(now []byte, ok bool) error {
		if ok != existed || (ok && string(now) != string(read)) {
			return errChanged
		}
		return nil
	}})
	if errors.Is(err, errChanged) {
		return false, nil // edited meanwhile: the next round sees it
	}
	if err != nil {
		return false, err
	}
	s.log.Info("filesync: JetStream → file", "file", p.Rel, "rev", k.rev)
	s.state[s.key(p)] = pairState{Hash: hash(k.content), Rev: k.rev}
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
	if err := s.dir.WriteFile(s.cfg.StateFile, data, wsfile.WriteOptions{}); err != nil {
		return fmt.Errorf("save sync state: %w", err)
	}
	return nil
}

// maxFileBytes bounds a synced file read from the workspace.
const maxFileBytes = 4 << 20

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
