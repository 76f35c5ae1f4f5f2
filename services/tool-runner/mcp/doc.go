// Package mcp serves the tools, resources and prompts of Model Context
// Protocol servers as tool-runner tools, with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// # Configuration
//
// tools.mcpServers has the shape users copy from Claude Desktop, Cursor or
// nanobot (see [ServerConfig]): a command (stdio), or a url (an SSE
// server when its path ends in /sse, streamable HTTP otherwise), or an
// explicit type; env, cwd, headers, toolTimeout (seconds, default 30) and
// enabledTools. nanofleet adds network, readOnlyPaths and allowCIDRs for
// the sandbox and the network guard, and disabled.
//
// # Names
//
// A server's tool t is served as mcp_<server>_<t>, a resource r (and a
// resource template) as mcp_<server>_resource_<r>, a prompt p as
// mcp_<server>_prompt_<p>; characters providers do not accept become '_',
// and runs of '_' collapse. A name longer than 64 characters is cut, with a
// hash of the whole appended; items whose names would clash all get a hash
// of their own name instead. Names never depend on listing order, so every
// runner names the same server's tools alike. Server names are checked so
// that two servers' prefixes cannot overlap.
//
// A resource is a read-only tool without arguments; a resource template a
// read-only tool whose arguments are the template's variables; a prompt a
// read-only tool whose arguments are the prompt's (strings). A tool is
// read-only when the server annotates it readOnlyHint. Text comes back as
// text; images, audio and binary resources are stored in the fleet's
// object store and attached as media.
//
// # Servers
//
// A [Manager] starts every enabled server in the background when it runs
// ([Manager.Started] tells when the first attempts are in, waiting a
// bounded time). A stdio server runs in
// the exec sandbox (tools.exec): in bubblewrap with the same read-only
// system binds as exec (so node and npx under /usr work), its private
// directory <workspace root>-mcp/<server> as HOME and working directory
// (or cwd, bound read-write), readOnlyPaths bound read-only, no network
// unless the server's config grants it, a scrubbed environment (env from
// its config and tools.exec.env only), exec's rlimits except CPU time, as
// the unprivileged host user when the runner is root. When bubblewrap
// cannot run, stdio servers are refused like exec, unless tools.exec.sandbox
// is "none". Remote servers are reached through a [netguard.Guard]:
// loopback, private, link-local and metadata addresses are refused, also
// after DNS and redirects, unless the server's allowCIDRs allow them;
// headers go only to the configured host.
//
// A server that cannot be started or reached is logged, its tools are not
// served, and it is retried with backoff (1 s doubling to 1 min, jittered). A
// server whose connection ends (the process died, the remote went away, a
// keep-alive ping or the ping after a failed call went unanswered) is
// restarted; calls arriving meanwhile wait for it within their timeout. A
// server that lists changed tools is listed again.
//
// # Calls
//
// Every call is bounded by the server's toolTimeout; one that runs out is
// cancelled (notifications/cancelled) and fails with an error matching
// [ErrTimeout] and context.DeadlineExceeded, so the model sees a time-out.
// Calls are independent requests on the server's connection: a call that
// hangs or gets a malformed answer fails alone, never blocking other calls
// of the server, other servers or other tools. A read-only call whose
// connection is lost is run once more after the reconnect; any other call
// fails saying its effect is unknown.
//
// # Across the fleet
//
// The runner publishes each server's tools with a [Publisher]; the
// [MicroPublisher] makes them a micro service instance of their own, in the
// runners' queue group, so a call reaches only runners that have the
// server, and a runner withdraws them while its server is down. Runners
// answer the catalog request all together (not as a queue group) and
// package toolclient merges their catalogs, so a worker sees the union.
// The runner's catalog lists the built-in tools first, then the MCP tools,
// each sorted by name; the worker sorts the definitions it sends to the
// model by name (toolschema.SortDefinitions), which interleaves them.
//
// # Guarantees
//
// Restart: each server has one supervisor goroutine, the only writer of
// its state (starting, ready, restarting, down, stopped). A failed
// attempt is retried after a backoff of 1 s doubling to 1 min, each wait
// jittered down by up to half (backoff.Backoff, as the bus's retries); a
// connection that lasted 30 s or more is remade at once with the backoff
// reset, one that ended sooner waits the backoff. While a server
// restarts its tools stay published and calls wait; while it is down they
// are withdrawn and calls fail with [ErrUnavailable].
//
// Ordering: a server's listings reach the [Publisher] in the order they
// were made, one Publish at a time across all servers; [Manager.Serve]
// publishes what is connected, then every change. [Manager.Get] and
// [Manager.Definitions] see a listing whole or not at all. When
// [Manager.Run]'s context ends it withdraws every server's tools before it
// stops the servers, and nothing is published after that.
//
// Concurrency: a [Manager] is safe for concurrent use; lookups never wait
// for a Publish; calls of one server run concurrently on its connection.
//
// The code follows these steps: supervise.go (start, restart, health),
// discover.go (listing), catalog.go and publish.go (publishing),
// route.go (calls), with the state they share in life.go.
package mcp
