// Package toolclient calls the fleet's tool runners from an agent worker,
// and defines the wire protocol both sides speak.
//
// # Protocol
//
// Each tool is a NATS micro endpoint on subject.Space.ToolCall(name),
// served by every tool-runner in the queue group "tool-runner", so one
// runner takes each call. The request is a protobuf ToolRequest published
// with a reply inbox. The runner answers on that inbox with:
//
//  1. at once, a heartbeat: an empty message with header
//     Nanofleet-Tool-Status: running (and Nanofleet-Tool-Runner: its id);
//  2. another heartbeat every heartbeat interval (1 s by default) while
//     the call runs;
//  3. last, the result: a protobuf ToolResult with
//     Nanofleet-Tool-Status: done.
//
// A runner that is shutting down answers a call it has not started with
// Nanofleet-Tool-Status: rejected; the call may go to another runner.
//
// The client therefore tells "still running" (heartbeats keep coming, for
// as long as the call's deadline allows) from "runner died" (no message
// for the liveness timeout, 5 s by default). When a runner dies mid-call,
// a read-only tool (ToolDefinition.read_only in the catalog) is sent again
// and another runner runs it; any other tool (exec, write_file, ...) is
// not repeated behind the model's back: the call ends with a result of
// kind TOOL_ERROR_KIND_INTERRUPTED saying so. When no runner subscribes to
// a tool's subject, NATS answers "no responders" at once; the client
// retries briefly (a runner may be restarting), then answers with the
// list of tools the runners do have, or says that no runner is reachable.
//
// The catalog endpoint, on subject.Space.ToolCatalog (<prefix>.tools.catalog),
// answers an empty request with a ToolCatalog: every tool's definition.
// It is not in the queue group: every runner answers, and the client
// merges the answers (runners serving different MCP servers serve
// different tools; a call still reaches only runners that serve its tool,
// since only they subscribe to its subject).
package toolclient
