package discord

import (
	"bytes"
	"context"

	"github.com/disgoorg/disgo/discord"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

// UploadLimit is the largest file the adapter uploads, per file: 25 MiB,
// Discord's default until January 2025. The documented default is now
// 10 MiB, and a server boosted to tier 2 or 3 takes 50 or 100 MiB; the
// adapter does not look up a server's boost tier, so a file between
// 10 and 25 MiB is tried, and one Discord refuses (413) becomes a note in
// the chat (media.SendOrNote).
const UploadLimit = 25 << 20

// attach sends attachment i of a reply; one Discord refuses is a note in
// the chat, as on the other platforms (media.SendOrNote).
func (a *Adapter) attach(ctx context.Context, msg *nanofleetv1.OutboundMessage, i int, m *nanofleetv1.MediaRef) error {
	return media.SendOrNote(ctx, a.log.With("chat", msg.GetChatId(), "n", i), "Discord", m,
		func(ctx context.Context) error { return a.sendMedia(ctx, msg, i, m) },
		classify,
		func(ctx context.Context, text string) error {
			// The refused request made no message, so the note takes its nonce.
			_, err := a.post(ctx, msg, text, false, nonce(msg.GetId()+"/media", i), nil)
			return err
		})
}

// sendMedia uploads an attachment from the object store, or sends the
// note saying why it cannot be (internal/media's Load: gone, empty or over
// [UploadLimit], which is then not uploaded).
func (a *Adapter) sendMedia(ctx context.Context, msg *nanofleetv1.OutboundMessage, i int, m *nanofleetv1.MediaRef) error {
	f, err := a.media.Load(ctx, m, "Discord", UploadLimit)
	if err != nil || f == nil {
		return err
	}
	switch {
	case f.Note != "":
		a.log.Warn("attachment not sent", "chat", msg.GetChatId(), "name", f.Name, "note", f.Note)
		_, err := a.post(ctx, msg, f.Note, false, nonce(msg.GetId()+"/media", i), nil)
		return err
	case f.URL != "":
		_, err := a.post(ctx, msg, f.URL, false, nonce(msg.GetId()+"/media", i), nil)
		return err
	}
	_, err = a.post(ctx, msg, "", false, nonce(msg.GetId()+"/media", i), []*discord.File{discord.NewFile(f.Name, "", bytes.NewReader(f.Data))})
	return err
}
