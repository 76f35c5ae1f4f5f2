package gateway

import "errors"

// Refusals: a message the fleet will not take, for a reason the sender
// must hear at once. Neither is worth sending again unchanged.
var (
	// ErrStorageFull is a message refused because the fleet's store has
	// no room for it; nothing was stored.
	ErrStorageFull = errors.New("storage full")
	// ErrTooLarge is a message larger than the fleet accepts.
	ErrTooLarge = errors.New("message too large")
)

// MaxContentBytes bounds an inbound message's text. It is far above any
// model's context window (about 250,000 tokens), and leaves a turn record
// (the message, tool results and the answer) room below the streams' 4 MiB
// message size.
const MaxContentBytes = 1 << 20

// RefusalText is what a chat user is told when err is a refusal, or "".
func RefusalText(err error) string {
	switch {
	case errors.Is(err, ErrStorageFull):
		return "⚠️ Storage full: the fleet has no room to store your message, so it was not received. Please try again once the operator has freed space."
	case errors.Is(err, ErrTooLarge):
		return "⚠️ Message too large: please send at most 1 MiB of text, or attach the content as a file."
	}
	return ""
}
