package subagent

import (
	"strings"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Channel is the channel of children's inbound and outbound subjects. No
// gateway serves it.
const Channel = "subagent"

// Metadata keys of a child's InboundMessage; the worker copies them onto
// the child's replies.
const (
	// MetaToolset is "subagent" on a child's messages.
	MetaToolset = "toolset"
	// MetaTools lists the tools a child may use, comma separated.
	MetaTools = "tools"
	// MetaID is the child's id, MetaParent its parent's session key.
	MetaID     = "subagent_id"
	MetaParent = "subagent_parent"
	// MetaLabel is the child's display label.
	MetaLabel = "subagent_label"
)

// ChildSender is the sender id of a child's task: its parent's user as
// "<channel>:<sender>", whose turn spawned it. The worker counts a child's
// tokens against that user (see [Payer]); as one sender "agent" every
// user's children shared one budget and one user-scoped memory.
func ChildSender(channel, sender string) string {
	if sender == "" {
		return "agent"
	}
	return channel + ":" + sender
}

// Payer is the user whose token budget a turn for in spends,
// "<channel>:<sender>": the sender, or for a child the parent's user its
// sender names.
func Payer(in *nanofleetv1.InboundMessage) string {
	if IsChild(in) && strings.Contains(in.GetSenderId(), ":") {
		return in.GetSenderId()
	}
	return in.GetChannel() + ":" + in.GetSenderId()
}

// ToolsetSubagent is the value of [MetaToolset] on a child's messages.
const ToolsetSubagent = "subagent"

// IsChild reports whether in is a subagent's task.
func IsChild(in *nanofleetv1.InboundMessage) bool {
	return in.GetMetadata()[MetaToolset] == ToolsetSubagent
}

// FilterDefinitions returns the tools a turn for in may use: all of defs,
// or for a subagent's task only those its message names. The worker calls
// it on the tool definitions of every turn; the model is never offered,
// and the loop never runs, a tool that is filtered out.
func FilterDefinitions(in *nanofleetv1.InboundMessage, defs []*nanofleetv1.ToolDefinition) []*nanofleetv1.ToolDefinition {
	if !IsChild(in) {
		return defs
	}
	allowed := map[string]bool{}
	for _, n := range strings.Split(in.GetMetadata()[MetaTools], ",") {
		if n = strings.TrimSpace(n); n != "" && n != "spawn" {
			allowed[n] = true
		}
	}
	out := make([]*nanofleetv1.ToolDefinition, 0, len(allowed))
	for _, d := range defs {
		if allowed[d.GetName()] {
			out = append(out, d)
		}
	}
	return out
}
