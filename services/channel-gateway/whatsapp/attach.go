package whatsapp

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

// UploadLimit is the largest attachment the adapter uploads. whatsmeow
// checks no size; WhatsApp's help gives 2 GB for a document on current
// clients (and 16 MB for photos, videos and voice messages, as it long
// gave for every file), but the gateway holds a file whole in memory, and
// whatsmeow encrypts it into a temporary file besides, so WhatsApp is held
// to [media.MemoryLimit]. An image, audio or video over 16 MB is sent as
// that kind still, as before: what current clients take of those is not
// stated where the 2 GB is.
const UploadLimit = media.MemoryLimit

// sendMedia uploads an attachment from the object store and sends it as
// the message kind its MIME type calls for. One gone from the store,
// empty or over [UploadLimit] is a note in the chat instead (retrying
// would not help; the oversized one is not read, nor uploaded); a failed
// read of the store is tried again.
func (a *Adapter) sendMedia(ctx context.Context, c Conn, chat types.JID, ref *nanofleetv1.MediaRef) error {
	f, err := a.media.Load(ctx, ref, "WhatsApp", UploadLimit)
	switch {
	case err != nil || f == nil:
		return err // a failed read is tried again; nothing to send is done
	case f.Note != "" || f.URL != "":
		// Gone from the store, empty or too large: the chat is told, as on
		// the other platforms; a link goes as text.
		text := cmp.Or(f.Note, f.URL)
		if err := c.Send(ctx, chat, &waE2E.Message{Conversation: proto.String(text)}); err != nil {
			return sendError(err)
		}
		return nil
	}
	data := f.Data
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
		name := f.Name
		m.DocumentMessage = &waE2E.DocumentMessage{URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: &up.FileLength, Mimetype: &mime,
			FileName: &name, Title: &name}
	}
	if err := c.Send(ctx, chat, &m); err != nil {
		return sendError(err)
	}
	return nil
}
