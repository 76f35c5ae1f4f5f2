package filesync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/wsfile"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

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
	key := s.key(p)
	switch {
	case err == nil:
		delete(s.refused, key)
		return data, fi.ModTime(), true, nil
	case errors.Is(err, fs.ErrNotExist):
		delete(s.refused, key)
		return nil, time.Time{}, false, nil
	case errors.Is(err, wsfile.ErrSymlink) && !s.parentIsPlain(p):
		return nil, time.Time{}, false, fmt.Errorf("not following a symlinked directory: %w", err)
	case errors.Is(err, wsfile.ErrSymlink), errors.Is(err, wsfile.ErrHardLink), errors.Is(err, wsfile.ErrNotRegular), errors.Is(err, wsfile.ErrTooLarge):
		if s.refused[key] != err.Error() {
			s.refused[key] = err.Error()
			s.log.Warn("filesync: not a regular file; not read, and replaced by JetStream's copy whenever there is one", "file", p.Rel, "reason", err)
		}
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
	if p.ReadOnly {
		return s.syncCopy(ctx, p, st)
	}
	data, fmod, fexists, ferr := s.readFile(p)
	if ferr != nil {
		return false, ferr
	}
	fc := string(data)
	k, err := s.kvCopy(ctx, p)
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

// syncCopy makes a read-only pair's file the bucket's content, nothing
// more. The bucket is read first: a file the profile does not have is
// left alone unread, so that what a session put there (a link, a FIFO)
// is not warned about on every poll.
func (s *Syncer) syncCopy(ctx context.Context, p Pair, st pairState) (bool, error) {
	k, err := s.kvCopy(ctx, p)
	if err != nil || !k.exists {
		return false, err
	}
	data, _, fexists, err := s.readFile(p)
	if err != nil {
		return false, err
	}
	fh := hash(string(data))
	if fexists && fh == hash(k.content) {
		return false, nil
	}
	if fexists && fh != st.Hash {
		s.log.Warn("filesync: workspace copy of a profile file changed; restoring it (tools.workspace.editableProfile is off)", "file", p.Rel)
	}
	return s.toFile(p, k, data, fexists)
}

// kvCopy is the pair's KV copy: the one kept since the last read while
// the pair's watcher saw no change, else read now.
func (s *Syncer) kvCopy(ctx context.Context, p Pair) (kvCopy, error) {
	s.keptMu.Lock()
	c := s.keptLocked(s.key(p))
	k, ok, gen, watched := c.copy, c.ok, c.gen, c.watched
	s.keptMu.Unlock()
	if ok {
		return k, nil
	}
	k, err := s.read(ctx, p)
	if err != nil || !watched {
		return k, err
	}
	s.keptMu.Lock()
	if c.watched && c.gen == gen {
		c.copy, c.ok = k, true
	}
	s.keptMu.Unlock()
	return k, nil
}

// forget drops the pair's kept KV copy: it changed, or may have.
func (s *Syncer) forget(key string) {
	s.keptMu.Lock()
	s.keptLocked(key).forget()
	s.keptMu.Unlock()
}

// setWatched records whether a watcher drops the pair's copy on change.
func (s *Syncer) setWatched(key string, on bool) {
	s.keptMu.Lock()
	c := s.keptLocked(key)
	c.watched = on
	c.forget()
	s.keptMu.Unlock()
}

func (s *Syncer) keptLocked(key string) *keptCopy {
	c, ok := s.kept[key]
	if !ok {
		c = &keptCopy{}
		s.kept[key] = c
	}
	return c
}

// forget drops the copy; the caller holds keptMu.
func (c *keptCopy) forget() {
	c.copy, c.ok = kvCopy{}, false
	c.gen++
}

func (s *Syncer) read(ctx context.Context, p Pair) (kvCopy, error) {
	if p.Scope != nil {
		doc, e, err := s.docs.Entry(ctx, *p.Scope)
		if errors.Is(err, memory.ErrNotFound) {
			return kvCopy{doc: &nanofleetv1.MemoryDoc{}}, nil
		}
		if err != nil {
			return kvCopy{}, err
		}
		return kvCopy{content: doc.GetContent(), rev: e.Revision(), at: e.Created(), exists: true, doc: doc}, nil
	}
	f, err := profile.ReadFile(ctx, s.profile, p.ProfileKey)
	if err != nil {
		return kvCopy{}, err
	}
	return kvCopy{content: f.Content, rev: f.Rev, at: f.Written, exists: f.Rev != 0}, nil
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
		rev, err = bus.CompareAndSet(ctx, s.profile, p.ProfileKey, []byte(content), k.rev)
		if bus.Conflict(err) {
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

// toFile writes JetStream's content to the file, unless the file changed
// since it was read.
func (s *Syncer) toFile(p Pair, k kvCopy, read []byte, existed bool) (bool, error) {
	// UnlessMax as readFile's bound: a file too large to read counts as
	// none there and here, so it is replaced, and never read whole.
	err := s.dir.WriteFile(p.Rel, []byte(k.content), wsfile.WriteOptions{UnlessMax: maxFileBytes, Unless: func(now []byte, ok bool) error {
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

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
