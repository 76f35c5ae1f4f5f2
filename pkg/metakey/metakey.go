// Package metakey names the metadata keys of the fleet's envelopes that
// one service writes and another reads. A key only one adapter reads (a
// platform's message or thread id) stays that adapter's own.
package metakey

const (
	// Stream is "true" on an inbound message whose chat shows an answer
	// as it is written: the gateway asks, the worker publishes deltas.
	Stream = "stream"
	// Streamed is "true" on a final answer whose deltas went out: a
	// gateway that has not seen them yet waits for the streamed message's
	// owner instead of sending the answer again.
	Streamed = "streamed"
	// IsGroup is "true" on a group chat's messages, set by every channel
	// and carried by what the fleet makes of them (a job's fires, a
	// subagent's messages): user-scoped memory stays out of a group.
	IsGroup = "is_group"
)
