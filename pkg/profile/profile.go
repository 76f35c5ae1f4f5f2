// Package profile keeps an agent's profile in JetStream: its bootstrap
// files (AGENTS.md, SOUL.md, USER.md, TOOLS.md, IDENTITY.md, HEARTBEAT.md)
// and its skills (skills/<name>/SKILL.md). The workspace directory seeds the
// profile once (at every start only when the operator made it editable;
// see [WithEditable]); workers read it from the profile bucket, never from
// a disk, so any worker on any machine builds the same context.
//
// Keys in the bucket are "<agent>.file.<name>" and "<agent>.skill.<name>",
// with both names encoded by subject.Token.
package profile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/wsfile"
)

// BootstrapFiles are the workspace files inlined into the system prompt, in
// prompt order.
var BootstrapFiles = []string{"AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "IDENTITY.md", "HEARTBEAT.md"}

// DefaultAgent is the agent id of a single-agent fleet.
const DefaultAgent = "default"

// FileKey is the bucket key of a bootstrap file.
func FileKey(agent, name string) string {
	return subject.Token(agent) + ".file." + subject.Token(name)
}

// SkillKey is the bucket key of a skill's SKILL.md.
func SkillKey(agent, name string) string {
	return subject.Token(agent) + ".skill." + subject.Token(name)
}

// File is a profile file (a bootstrap file or a skill) as the bucket
// holds it.
type File struct {
	Content string
	// Rev is the key's revision, for a compare-and-set; 0 when there is
	// none (a missing or deleted key is an empty file).
	Rev uint64
	// Written is when the revision was written; zero with Rev 0.
	Written time.Time
}

// ReadFile reads the profile file under key of kv as [bus.Get] does (each
// try bounded, tried again while the failure is transient); a missing or
// deleted key is an empty File at revision 0, not an error.
func ReadFile(ctx context.Context, kv jetstream.KeyValue, key string) (File, error) {
	e, err := bus.Get(ctx, kv, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return File{}, nil
	}
	if err != nil {
		return File{}, fmt.Errorf("read profile %s: %w", key, err)
	}
	return File{Content: string(e.Value()), Rev: e.Revision(), Written: e.Created()}, nil
}

// SeedOption changes how [Seed] treats the workspace.
type SeedOption func(*seedOptions)

type seedOptions struct {
	editable bool
	log      *slog.Logger
}

// WithEditable(true) makes the workspace the profile's source at every
// start, as in nanobot: whatever is in the workspace's bootstrap files and
// skills (which sessions can then change) replaces the bucket's copy.
// Without it the workspace seeds the profile once, when the bucket holds
// none for the agent; after that the bucket is the profile and the
// workspace's files are copies that are never read back, so no session
// can change what every session's prompt says.
func WithEditable(editable bool) SeedOption {
	return func(o *seedOptions) { o.editable = editable }
}

// WithLogger makes Seed log the files it refuses (symlinks, hard links,
// special files) to l; the default, and nil, log nothing.
func WithLogger(l *slog.Logger) SeedOption {
	return func(o *seedOptions) { o.log = observe.OrDiscard(l) }
}

// maxFileBytes bounds a bootstrap file or skill read from the workspace.
const maxFileBytes = 1 << 20

// seededKey marks an agent whose profile was seeded; it has two parts, so
// the [Cache] ignores it.
func seededKey(agent string) string { return subject.Token(agent) + ".seeded" }

// Seed copies the workspace's bootstrap files and skills into the bucket,
// writing only what differs, and returns how many entries it wrote; see
// [WithEditable] for when it reads the workspace at all. Files are read
// beneath the workspace without following symlinks; a symlink, hard link
// or special file in place of a profile file is skipped with a warning,
// never followed (it may point at a host file such as the config).
func Seed(ctx context.Context, kv jetstream.KeyValue, agent, workspace string, opts ...SeedOption) (int, error) {
	o := seedOptions{log: observe.OrDiscard(nil)}
	for _, opt := range opts {
		opt(&o)
	}
	log := o.log
	if !o.editable {
		seeded, err := hasProfile(ctx, kv, agent)
		if err != nil {
			return 0, err
		}
		if seeded {
			log.Info("profile: JetStream holds the agent's profile; the workspace's copies are not read back (to copy reviewed edits: nanofleet profile seed)", "agent", agent)
			return 0, nil
		}
	}
	dir, err := wsfile.Open(workspace)
	if err != nil {
		return 0, fmt.Errorf("seed profile: %w", err)
	}
	defer dir.Close()
	wrote := 0
	put := func(key string, data []byte) error {
		if e, err := bus.Get(ctx, kv, key); err == nil && bytes.Equal(e.Value(), data) {
			return nil
		} else if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("read profile %s: %w", key, err)
		}
		if _, err := kv.Put(ctx, key, data); err != nil {
			return fmt.Errorf("write profile %s: %w", key, err)
		}
		wrote++
		return nil
	}
	read := func(rel string) ([]byte, bool, error) {
		data, _, err := dir.ReadFile(rel, maxFileBytes)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, false, nil
		case errors.Is(err, wsfile.ErrSymlink), errors.Is(err, wsfile.ErrHardLink),
			errors.Is(err, wsfile.ErrNotRegular), errors.Is(err, wsfile.ErrTooLarge):
			log.Warn("profile: workspace file skipped, not seeded", "agent", agent, "file", rel, "reason", err)
			return nil, false, nil
		case err != nil:
			return nil, false, fmt.Errorf("seed profile: %w", err)
		}
		return data, true, nil
	}
	for _, name := range BootstrapFiles {
		data, ok, err := read(name)
		if err != nil {
			return wrote, err
		}
		if !ok {
			continue
		}
		if err := put(FileKey(agent, name), data); err != nil {
			return wrote, err
		}
	}
	skills, err := dir.ReadDir("skills")
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, wsfile.ErrSymlink), errors.Is(err, syscall.ENOTDIR):
		log.Warn("profile: workspace skills directory skipped, not seeded", "agent", agent, "reason", err)
	case err != nil:
		return wrote, fmt.Errorf("seed skills: %w", err)
	}
	for _, d := range skills {
		if !d.IsDir() { // a symlinked skill directory is not a directory here
			continue
		}
		data, ok, err := read(filepath.Join("skills", d.Name(), "SKILL.md"))
		if err != nil {
			return wrote, err
		}
		if !ok {
			continue
		}
		if err := put(SkillKey(agent, d.Name()), data); err != nil {
			return wrote, err
		}
	}
	if _, err := kv.Put(ctx, seededKey(agent), []byte("1")); err != nil {
		return wrote, fmt.Errorf("mark profile seeded: %w", err)
	}
	return wrote, nil
}

// hasProfile reports whether the bucket already holds the agent's
// profile: the seeded mark, or (a bucket from before the mark) any of its
// bootstrap files, in which case the mark is added.
func hasProfile(ctx context.Context, kv jetstream.KeyValue, agent string) (bool, error) {
	_, err := bus.Get(ctx, kv, seededKey(agent))
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, fmt.Errorf("read profile mark: %w", err)
	}
	for _, name := range BootstrapFiles {
		_, err := bus.Get(ctx, kv, FileKey(agent, name))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("read profile %s: %w", name, err)
		}
		if _, err := kv.Put(ctx, seededKey(agent), []byte("1")); err != nil {
			return false, fmt.Errorf("mark profile seeded: %w", err)
		}
		return true, nil
	}
	return false, nil
}

// Snapshot is an agent's profile at one moment.
type Snapshot struct {
	// Files by name (e.g. "SOUL.md").
	Files map[string]string
	// Skills sorted by name.
	Skills []Skill
}

// Cache keeps every agent's profile up to date by watching the bucket, so
// a turn reads its profile without a round trip.
type Cache struct {
	mu     sync.RWMutex
	agents map[string]*Snapshot
	w      jetstream.KeyWatcher
	ready  chan struct{}
}

// Watch starts a cache over kv; it is ready when [Cache.Ready] is closed.
func Watch(ctx context.Context, kv jetstream.KeyValue) (*Cache, error) {
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch profile: %w", err)
	}
	c := &Cache{agents: map[string]*Snapshot{}, w: w, ready: make(chan struct{})}
	go c.run()
	return c, nil
}

// Ready is closed once the cache holds the bucket's initial content.
func (c *Cache) Ready() <-chan struct{} { return c.ready }

// Stop ends the watch.
func (c *Cache) Stop() { _ = c.w.Stop() }

func (c *Cache) run() {
	readyOnce := sync.OnceFunc(func() { close(c.ready) })
	defer readyOnce()
	for e := range c.w.Updates() {
		if e == nil {
			readyOnce()
			continue
		}
		c.apply(e)
	}
}

func (c *Cache) apply(e jetstream.KeyValueEntry) {
	parts := strings.SplitN(e.Key(), ".", 3)
	if len(parts) != 3 {
		return
	}
	agent, err1 := subject.ParseToken(parts[0])
	name, err2 := subject.ParseToken(parts[2])
	if err1 != nil || err2 != nil {
		return
	}
	deleted := e.Operation() != jetstream.KeyValuePut
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.agents[agent]
	snap := &Snapshot{Files: map[string]string{}}
	if old != nil {
		for k, v := range old.Files {
			snap.Files[k] = v
		}
		snap.Skills = append(snap.Skills, old.Skills...)
	}
	switch parts[1] {
	case "file":
		if deleted {
			delete(snap.Files, name)
		} else {
			snap.Files[name] = string(e.Value())
		}
	case "skill":
		kept := snap.Skills[:0]
		for _, s := range snap.Skills {
			if s.Name != name && s.Dir != name {
				kept = append(kept, s)
			}
		}
		snap.Skills = kept
		if !deleted {
			snap.Skills = append(snap.Skills, ParseSkill(name, string(e.Value())))
			sort.Slice(snap.Skills, func(i, j int) bool { return snap.Skills[i].Name < snap.Skills[j].Name })
		}
	default:
		return
	}
	c.agents[agent] = snap
}

// Get returns the agent's current profile; never nil. The snapshot is
// shared: callers must not modify it.
func (c *Cache) Get(agent string) *Snapshot {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if s := c.agents[agent]; s != nil {
		return s
	}
	return &Snapshot{Files: map[string]string{}}
}
