package mcp

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
)

// MicroPublisher publishes each MCP server's tools as a NATS micro service
// of its own, an instance of the runner's service (same name, version and
// queue group, metadata mcp_server=<name>), with one endpoint per tool.
// Withdrawing a server's tools stops that instance, so its subjects have
// no subscriber on this runner and calls go to runners that still serve
// them. A new listing starts the new instance before stopping the old
// one: the subjects are never without a subscriber in between.
type MicroPublisher struct {
	// NC is the runner's connection.
	NC *nats.Conn
	// Service is the runner's service config; Description and Metadata
	// are extended per server.
	Service micro.Config
	// Subject is the subject of a tool's endpoint.
	Subject func(tool string) string
	// Handler serves a tool's calls.
	Handler func(tool string) micro.Handler

	mu   sync.Mutex
	svcs map[string]micro.Service
}

// Publish implements [Publisher].
func (p *MicroPublisher) Publish(ctx context.Context, server string, defs []toolschema.Tool) error {
	var next micro.Service
	if len(defs) > 0 {
		cfg := p.Service
		cfg.Description = fmt.Sprintf("nanofleet MCP tools of server %s", server)
		cfg.Metadata = maps.Clone(p.Service.Metadata)
		if cfg.Metadata == nil {
			cfg.Metadata = map[string]string{}
		}
		cfg.Metadata[fleetstatus.MCPServerKey] = server
		svc, err := micro.AddService(p.NC, cfg)
		if err != nil {
			return fmt.Errorf("register MCP server %s's tools: %w", server, err)
		}
		for _, d := range defs {
			err := svc.AddEndpoint(d.Name, p.Handler(d.Name),
				micro.WithEndpointSubject(p.Subject(d.Name)),
				micro.WithEndpointMetadata(map[string]string{
					"read_only":  fmt.Sprint(d.ReadOnly),
					"exclusive":  fmt.Sprint(d.Exclusive),
					"mcp_server": server,
				}))
			if err != nil {
				_ = svc.Stop()
				return fmt.Errorf("endpoint %s: %w", d.Name, err)
			}
		}
		// The subscriptions are in place once the server has them. A
		// flush cut short by a lost connection is sent again once it is
		// back (the subscriptions with it).
		fctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
		err = bus.Retry(fctx, backoff.Backoff{}, func(ctx context.Context) error { return bus.Flush(ctx, p.NC) }, nil)
		cancel()
		if err != nil {
			_ = svc.Stop()
			return fmt.Errorf("register MCP server %s's tools: %w", server, err)
		}
		next = svc
	}
	p.mu.Lock()
	if p.svcs == nil {
		p.svcs = map[string]micro.Service{}
	}
	old := p.svcs[server]
	if next != nil {
		p.svcs[server] = next
	} else {
		delete(p.svcs, server)
	}
	p.mu.Unlock()
	if old != nil {
		if err := old.Stop(); err != nil {
			return fmt.Errorf("withdraw MCP server %s's old tools: %w", server, err)
		}
	}
	return nil
}
