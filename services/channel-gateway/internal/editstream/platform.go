package editstream

import (
	"context"
	"fmt"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Platform posts and edits messages for the streams.
type Platform interface {
	// Post sends text as a new message in msg's chat (replying to the
	// asking message) and returns the new message's id.
	Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, text string) (id string, err error)
	// Edit replaces the text of message id. final is set for the final
	// answer.
	Edit(ctx context.Context, msg *nanofleetv1.OutboundMessage, id, text string, final bool) error
}

// Deleter is a [Platform] that can delete a message. The partial message
// of a stream whose final edit did not happen is deleted, so that the
// answer sent whole is the only one shown.
type Deleter interface {
	Delete(ctx context.Context, msg *nanofleetv1.OutboundMessage, id string) error
}

// RetryAfter is a [Platform] error that asks to wait before the next post
// or edit (a rate limit). The stream does not fail: it sends its latest
// text once the wait is over.
type RetryAfter struct {
	After time.Duration
	Err   error
}

func (e *RetryAfter) Error() string {
	return fmt.Sprintf("rate limited for %s: %v", e.After, e.Err)
}

func (e *RetryAfter) Unwrap() error { return e.Err }

// Finalizer is a [Platform] whose streamed message stays open until the
// final edit (DingTalk's AI card shows "generating" until finalized), so
// that edit is made even when the whole answer is already shown.
type Finalizer interface {
	FinalEditRequired() bool
}

func mustFinalize(p Platform) bool {
	f, ok := p.(Finalizer)
	return ok && f.FinalEditRequired()
}
