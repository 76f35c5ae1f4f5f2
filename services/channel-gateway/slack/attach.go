package slack

import (
	"bytes"
	"context"

	"github.com/slack-go/slack"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// UploadLimit is the largest attachment the adapter uploads. Slack takes
// files up to 1 GB (https://slack.com/help/articles/201330736-Add-files-to-Slack),
// but the gateway holds a file whole in memory while it sends it, so
// Slack is held to [media.MemoryLimit].
const UploadLimit = media.MemoryLimit

// attach sends attachment i of a reply; one Slack refuses is a note in
// the thread, as on the other platforms (media.SendOrNote).
func (a *Adapter) attach(ctx context.Context, msg *nanofleetv1.OutboundMessage, i int, m *nanofleetv1.MediaRef) error {
	return media.SendOrNote(ctx, a.log.With("chat", msg.GetChatId(), "n", i), "Slack", m,
		func(ctx context.Context) error { return a.sendMedia(ctx, msg, m) },
		classify,
		func(ctx context.Context, text string) error { return a.note(ctx, msg, text) })
}

// sendMedia uploads an attachment from the object store into the reply's
// thread (files.getUploadURLExternal, the bytes to the URL it gives,
// files.completeUploadExternal: slack-go's UploadFileContext; the
// deprecated files.upload is not used), sends a link as text, or sends
// the note saying why it cannot be (internal/media's Load: gone, empty or
// over [UploadLimit], which is then not uploaded).
func (a *Adapter) sendMedia(ctx context.Context, msg *nanofleetv1.OutboundMessage, m *nanofleetv1.MediaRef) error {
	f, err := a.media.Load(ctx, m, "Slack", UploadLimit)
	if err != nil || f == nil {
		return err
	}
	switch {
	case f.Note != "":
		a.log.Warn("attachment not sent", "chat", msg.GetChatId(), "name", f.Name, "note", f.Note)
		return a.note(ctx, msg, f.Note)
	case f.URL != "":
		return a.note(ctx, msg, f.URL)
	}
	_, err = a.api.UploadFileContext(ctx, slack.UploadFileParameters{
		Reader: bytes.NewReader(f.Data), FileSize: len(f.Data), Filename: f.Name, Title: f.Name,
		Channel: msg.GetChatId(), ThreadTimestamp: msg.GetMetadata()["thread_ts"],
	})
	return err
}

// note posts text in the reply's thread, escaped as Slack requires of all
// text (&, < and >), so that a file name the model wrote cannot mention
// <!channel> or show a link under another name.
func (a *Adapter) note(ctx context.Context, msg *nanofleetv1.OutboundMessage, text string) error {
	return a.post(ctx, msg, markup.EscapeSlack(text))
}
