package mcp

import (
	"context"
	"log/slog"
	"sync"

	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// Publisher makes a server's tools callable by the fleet. The runner
// passes a [MicroPublisher]; tests may record the calls.
type Publisher interface {
	// Publish replaces the tools published for server; none withdraws
	// them. It waits for the bus at most until ctx ends.
	Publish(ctx context.Context, server string, defs []toolschema.Tool) error
}

// catalog is publishing: the tools of every connected server by name,
// which the runner looks calls up in, and the [Publisher] that makes them
// callable by the fleet. Servers' supervisors hand it each listing; it
// alone changes tools and pub.
type catalog struct {
	log *slog.Logger

	// pubMu serialises publishing, so that a server's listings reach the
	// Publisher in the order they were made; mu alone guards the fields,
	// so lookups never wait for a Publish.
	pubMu sync.Mutex
	mu    sync.Mutex
	pub   Publisher
	tools map[string]entry // by tool name
	// closed: withdrawn for good; later listings are dropped.
	closed bool
}

type entry struct {
	server *server
	tool   tools.Tool
	schema *toolschema.Schema
}

func newCatalog(log *slog.Logger) *catalog {
	return &catalog{log: log, tools: map[string]entry{}}
}

// serve publishes the tools of servers with p, and from then on every
// listing publish gets.
func (c *catalog) serve(ctx context.Context, p Publisher, servers []*server) {
	if !c.lockOpen() {
		return
	}
	defer c.pubMu.Unlock()
	c.pub = p
	c.mu.Unlock()
	for _, s := range servers {
		if defs := s.definitions(); len(defs) > 0 {
			if err := p.Publish(ctx, s.name, defs); err != nil {
				c.log.Error("publish MCP tools", "server", s.name, "err", err)
			}
		}
	}
}

// lockOpen takes pubMu, then mu, and reports whether the catalog is
// still open. When it is, the caller releases mu once it has changed the
// fields, and pubMu once it has published; when it is closed, lockOpen
// releases both.
func (c *catalog) lockOpen() bool {
	c.pubMu.Lock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.pubMu.Unlock()
		return false
	}
	return true
}

// publish records the tools of server s (none: withdrawn) and publishes
// them when serving.
func (c *catalog) publish(ctx context.Context, s *server, ts []tools.Tool, set *tools.Set) {
	if !c.lockOpen() {
		return
	}
	defer c.pubMu.Unlock()
	for name, e := range c.tools {
		if e.server == s {
			delete(c.tools, name)
		}
	}
	defs := make([]toolschema.Tool, 0, len(ts))
	for _, t := range ts {
		def := t.Definition()
		_, schema, _ := set.Get(def.Name)
		c.tools[def.Name] = entry{server: s, tool: t, schema: schema}
		defs = append(defs, def)
	}
	p := c.pub
	c.mu.Unlock()
	toolschema.SortTools(defs)
	if p != nil {
		if err := p.Publish(ctx, s.name, defs); err != nil {
			c.log.Error("publish MCP tools", "server", s.name, "err", err)
		}
	}
}

// close withdraws every server's tools for good.
func (c *catalog) close(ctx context.Context, servers []*server) {
	if !c.lockOpen() {
		return
	}
	defer c.pubMu.Unlock()
	c.closed = true
	clear(c.tools)
	p := c.pub
	c.pub = nil
	c.mu.Unlock()
	if p != nil {
		for _, s := range servers {
			if err := p.Publish(ctx, s.name, nil); err != nil {
				c.log.Warn("withdraw MCP tools", "server", s.name, "err", err)
			}
		}
	}
}

// get returns a published tool and its compiled schema.
func (c *catalog) get(name string) (tools.Tool, *toolschema.Schema, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.tools[name]
	return e.tool, e.schema, ok
}

// definitions returns the definitions of the published tools, sorted by
// name.
func (c *catalog) definitions() []toolschema.Tool {
	c.mu.Lock()
	defs := make([]toolschema.Tool, 0, len(c.tools))
	for _, e := range c.tools {
		defs = append(defs, e.tool.Definition())
	}
	c.mu.Unlock()
	toolschema.SortTools(defs)
	return defs
}
