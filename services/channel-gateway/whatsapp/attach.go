package whatsapp

import (
	"context"
	"fmt"
	"strings"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// sendMedia uploads an attachment from the object store and sends it as
// the message kind its MIME type calls for. An attachment that cannot be
// read (gone, too large) is logged and skipped: retrying would not help.
func (a *Adapter) sendMedia(ctx context.Context, c Conn, chat types.JID, ref *nanofleetv1.MediaRef) error {
	data, err := a.media.Get(ctx, ref.GetObject())
	if err != nil {
		a.log.Warn("whatsapp attachment not sent", "object", ref.GetObject(), "err", err)
		return nil
	}
	mime := ref.GetMimeType()
	if mime == "" {
		mime = "application/octet-stream"
	}
	kind := whatsmeow.MediaDocument
	switch {
	case strings.HasPrefix(mime, "image/"):
		kind = whatsmeow.MediaImage
	case strings.HasPrefix(mime, "audio/"):
		kind = whatsmeow.MediaAudio
	case strings.HasPrefix(mime, "video/"):
		kind = whatsmeow.MediaVideo
	}
	up, err := c.Upload(ctx, data, kind)
	if err != nil {
		return gateway.Retry(fmt.Errorf("whatsapp: upload %s: %w", ref.GetName(), err), 0)
	}
	var m waE2E.Message
	switch kind {
	case whatsmeow.MediaImage:
		m.ImageMessage = &waE2E.ImageMessage{URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: &up.FileLength, Mimetype: &mime}
	case whatsmeow.MediaAudio:
		m.AudioMessage = &waE2E.AudioMessage{URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: &up.FileLength, Mimetype: &mime,
			PTT: proto.Bool(strings.HasPrefix(mime, "audio/ogg"))} // Opus in Ogg is how voice notes travel
	case whatsmeow.MediaVideo:
		m.VideoMessage = &waE2E.VideoMessage{URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: &up.FileLength, Mimetype: &mime}
	default:
		name := ref.GetName()
		m.DocumentMessage = &waE2E.DocumentMessage{URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: &up.FileLength, Mimetype: &mime,
			FileName: &name, Title: &name}
	}
	if err := c.Send(ctx, chat, &m); err != nil {
		return sendError(err)
	}
	return nil
}
