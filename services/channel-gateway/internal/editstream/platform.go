package editstream

import (
	"context"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// Platform posts and edits messages for the streams. A post or edit that
// fails with a retryable delivery error naming a wait
// (gateway.Retry(err, d), d > 0: a rate limit, as the adapter's
// classification says for its deliveries) does not fail the stream: it
// sends its latest text once the wait is over. Any other error does.
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

// rateLimited reports whether err, a [Platform]'s, asks the stream to
// wait rather than fail, and how long.
func rateLimited(err error) (time.Duration, bool) {
	retry, after := gateway.Retryable(err)
	return after, retry && after > 0
}

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
