package mcp

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// Discovery: what a server offers (tools, resources, resource templates,
// prompts), turned into runner tools with their fleet-wide names and cut
// down to enabledTools. It reads the session only; the supervisor records
// and publishes the result.

// discover lists the server's tools, resources, templates and prompts and
// turns the enabled ones into tools.
func (s *server) discover(ctx context.Context, sess *mcpsdk.ClientSession) ([]tools.Tool, error) {
	caps := &mcpsdk.ServerCapabilities{}
	if r := sess.InitializeResult(); r != nil && r.Capabilities != nil {
		caps = r.Capabilities
	}
	var items []*item
	if caps.Tools != nil {
		for t, err := range sess.Tools(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("list tools: %w", err)
			}
			if t == nil {
				continue
			}
			it, err := toolItem(t)
			if err != nil {
				s.log.Warn("MCP tool skipped: its input schema is not usable", "tool", t.Name, "err", err)
				continue
			}
			items = append(items, it)
		}
	}
	// A listing the server does not support (a JSON-RPC error) is
	// skipped; any other failure fails the discovery, so that a broken
	// connection never replaces a full set of tools by a partial one.
	optional := func(what string, err error) error {
		var wire *jsonrpc.Error
		if errors.As(err, &wire) {
			s.log.Warn("MCP server's "+what+" not served: listing failed", "err", err)
			return nil
		}
		return fmt.Errorf("list %s: %w", what, err)
	}
	resources := 0
	if caps.Resources != nil {
	resourceList:
		for r, err := range sess.Resources(ctx, nil) {
			switch {
			case err != nil:
				if err := optional("resources", err); err != nil {
					return nil, err
				}
				break resourceList
			case r == nil:
			case resources >= maxResources:
				resources++
			default:
				resources++
				items = append(items, resourceItem(r))
			}
		}
	templateList:
		for r, err := range sess.ResourceTemplates(ctx, nil) {
			switch {
			case err != nil:
				if err := optional("resource templates", err); err != nil {
					return nil, err
				}
				break templateList
			case r == nil:
			case resources >= maxResources:
				resources++
			default:
				resources++
				it, err := templateItem(r)
				if err != nil {
					s.log.Warn("MCP resource template skipped", "template", r.Name, "err", err)
					continue
				}
				items = append(items, it)
			}
		}
		if resources > maxResources {
			s.log.Warn("MCP server lists too many resources; only the first ones are served as tools", "served", maxResources, "listed", resources)
		}
	}
	if caps.Prompts != nil {
		for p, err := range sess.Prompts(ctx, nil) {
			if err != nil {
				if err := optional("prompts", err); err != nil {
					return nil, err
				}
				break
			}
			if p != nil {
				items = append(items, promptItem(p))
			}
		}
	}
	items = assignNames(s.name, items)
	if !s.cfg.allEnabled() {
		items = s.filter(items)
	}
	ts := make([]tools.Tool, len(items))
	for i, it := range items {
		it.def.Name = it.name
		ts[i] = itemTool{s: s, it: it}
	}
	return ts, nil
}

// filter keeps the items enabledTools names and warns about names that
// match nothing.
func (s *server) filter(items []*item) []*item {
	var kept []*item
	for _, it := range items {
		if enabled(s.cfg.EnabledTools, it) {
			kept = append(kept, it)
		}
	}
	for _, e := range s.cfg.EnabledTools {
		found := false
		for _, it := range items {
			if enabled([]string{e}, it) {
				found = true
				break
			}
		}
		if !found {
			names := make([]string, len(items))
			for i, it := range items {
				names[i] = it.name
			}
			s.log.Warn("enabledTools entry matches nothing the MCP server offers", "entry", e, "available", names)
		}
	}
	return kept
}
