// Package runner is the tool-runner service: a NATS micro service
// ("tool-runner") that executes the file, exec and web tools, and the
// tools of the MCP servers in tools.mcpServers (package mcp), for the
// fleet's agent workers, confined to workspaces.
//
// # Endpoints
//
// One endpoint per tool on subject.Space.ToolCall(name), plus a catalog
// endpoint on subject.Space.ToolCatalog answering a ToolCatalog (the
// built-in definitions sorted by name, then the MCP ones sorted by name).
// The tool endpoints are in the queue group "tool-runner": any number of
// runners serve one fleet, and each call goes to one of the runners that
// serve the tool. Each MCP server's tools are a micro service instance of
// their own, withdrawn while the server is down. The catalog endpoint is
// not in the queue group: every runner answers, and package toolclient
// merges the answers, since runners with different MCP servers serve
// different tools.
//
// # A call
//
// The request is a ToolRequest. The runner answers on the reply inbox with
// a heartbeat at once and then every heartbeat interval (header
// Nanofleet-Tool-Status: running) until the final ToolResult (status
// done), so that a caller tells a long call from a dead runner; see
// package toolclient for the protocol. The arguments are parsed and
// validated against the tool's schema (bad ones come back as
// TOOL_ERROR_KIND_INVALID_ARGUMENTS naming the field and the rule), the
// workspace is opened, and the tool runs with the request's timeout.
// Refusals of the sandbox or the network guard come back as
// TOOL_ERROR_KIND_DENIED with the reason, time-outs as
// TOOL_ERROR_KIND_TIMEOUT, other failures as TOOL_ERROR_KIND_FAILED.
// Results longer than tools.runner.oversizeChars (16,000) are stored in the
// fleet's object store; the model gets a preview and a ref for
// read_tool_output.
//
// Each call runs in its own goroutine (micro delivers an endpoint's
// messages one at a time), at most tools.runner.maxConcurrent at once;
// further calls wait, heartbeating.
//
// # Workspaces
//
// Per agent (the default): the default agent's workspace is
// tools.workspace.root itself (as nanobot's ~/.nanobot/workspace), used
// for requests without an agent id or with "default"; any other agent's
// is <root>-agents/<token(agent_id)>. Per session
// (tools.workspace.perSession): <root>-sessions/<token(session_key)>.
//
// token is subject.Token, a reversible encoding that keeps only letters,
// digits, '-' and '_', so an id cannot name another directory. The other
// workspaces sit beside the root, never inside it, so no workspace
// contains another (the default agent cannot list the others' files), and
// the sandbox hides the parent directory. A workspace is created on first
// use. Several runners (replicas) may share the directories on one volume:
// the file tools replace files atomically (temporary file + rename), so a
// concurrent reader sees the old or the new content, never a torn file.
//
// # Lifecycle
//
// [Runner.Start] opens the object store, probes the sandbox (logging why
// exec will be refused if bubblewrap cannot run; the other tools are
// served regardless) and registers the service. [Runner.Stop] stops taking
// calls, answers calls not yet started with "rejected" (the client sends
// them to another runner) and waits for running calls until its context
// ends, then cancels them.
package runner
