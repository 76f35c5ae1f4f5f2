// Package profile keeps an agent's profile in JetStream: its bootstrap
// files (AGENTS.md, SOUL.md, USER.md, TOOLS.md, IDENTITY.md, HEARTBEAT.md)
// and its skills (skills/<name>/SKILL.md). The workspace directory seeds the
// profile; workers read it from the profile bucket, never from a disk, so
// any worker on any machine builds the same context.
//
// Keys in the bucket are "<agent>.file.<name>" and "<agent>.skill.<name>",
// with both names encoded by subject.Token.
package profile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/subject"
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

// Seed copies the workspace's bootstrap files and skills into the bucket,
// writing only what differs. It returns how many entries it wrote.
func Seed(ctx context.Context, kv jetstream.KeyValue, agent, workspace string) (int, error) {
	wrote := 0
	put := func(key string, data []byte) error {
		if e, err := kv.Get(ctx, key); err == nil && bytes.Equal(e.Value(), data) {
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
	for _, name := range BootstrapFiles {
		data, err := os.ReadFile(filepath.Join(workspace, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return wrote, fmt.Errorf("seed profile: %w", err)
		}
		if err := put(FileKey(agent, name), data); err != nil {
			return wrote, err
		}
	}
	skills, err := os.ReadDir(filepath.Join(workspace, "skills"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return wrote, fmt.Errorf("seed skills: %w", err)
	}
	for _, d := range skills {
		if !d.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(workspace, "skills", d.Name(), "SKILL.md"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return wrote, fmt.Errorf("seed skill %s: %w", d.Name(), err)
		}
		if err := put(SkillKey(agent, d.Name()), data); err != nil {
			return wrote, err
		}
	}
	return wrote, nil
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
