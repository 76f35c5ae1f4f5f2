package feishu

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

// Upload limits of the open platform (im/v1/images and im/v1/files).
const (
	ImageLimit = 10 << 20
	FileLimit  = 30 << 20
)

// imageTypes are the image formats im/v1/images takes; other images are
// sent as files.
var imageTypes = map[string]bool{
	"image/jpeg": true, "image/png": true, "image/webp": true, "image/gif": true,
	"image/tiff": true, "image/bmp": true, "image/x-icon": true, "image/vnd.microsoft.icon": true,
}

// sendMedia sends one attachment of a reply from the object store: an
// image up to [ImageLimit] as an image message (uploaded to im/v1/images),
// anything else up to [FileLimit] as a file message (im/v1/files). An
// attachment the platform cannot take (too large, empty, refused) or the
// store no longer holds becomes a text message saying so (internal/media's
// Load and Note), so the reply is delivered and the user knows what is
// missing. uuid makes the message idempotent; an upload repeated by a
// retry only leaves an unused key.
func (a *Adapter) sendMedia(ctx context.Context, msg *nanofleetv1.OutboundMessage, m *nanofleetv1.MediaRef, uuid string) error {
	f, err := a.media.Load(ctx, m, "Feishu", FileLimit)
	switch {
	case err != nil || f == nil:
		return err
	case f.Note != "":
		return a.mediaNote(ctx, msg, uuid, f.Name, f.Note)
	case f.URL != "":
		return a.send(ctx, msg, FormatText, f.URL, uuid)
	}
	msgType, content, err := a.upload(ctx, f.MimeType, f.Name, f.Data)
	if retry, _ := gateway.Retryable(err); err != nil && !retry {
		a.log.Warn("feishu refused an attachment", "id", msg.GetId(), "name", f.Name, "err", err)
		return a.mediaNote(ctx, msg, uuid, f.Name, media.Note(f.Name, "was refused by Feishu"))
	}
	if err != nil {
		return err
	}
	_, err = a.post(ctx, msg, msgType, content, uuid)
	return err
}

// upload stores an attachment on the platform and returns the message
// type and content that show it.
func (a *Adapter) upload(ctx context.Context, mimeType, name string, data []byte) (msgType, content string, err error) {
	var resp *larkcore.ApiResp
	var answer larkcore.CodeError
	var key *string
	if imageTypes[strings.ToLower(mimeType)] && len(data) <= ImageLimit {
		msgType = "image"
		var r *larkim.CreateImageResp
		r, err = a.im.Image.Create(ctx, larkim.NewCreateImageReqBuilder().Body(
			larkim.NewCreateImageReqBodyBuilder().ImageType(larkim.ImageTypeMessage).Image(bytes.NewReader(data)).Build()).Build())
		if r != nil {
			resp, answer = r.ApiResp, r.CodeError
			if r.Data != nil {
				key = r.Data.ImageKey
			}
		}
	} else {
		msgType = "file"
		var r *larkim.CreateFileResp
		r, err = a.im.File.Create(ctx, larkim.NewCreateFileReqBuilder().Body(
			larkim.NewCreateFileReqBodyBuilder().FileType(fileType(name)).FileName(name).File(bytes.NewReader(data)).Build()).Build())
		if r != nil {
			resp, answer = r.ApiResp, r.CodeError
			if r.Data != nil {
				key = r.Data.FileKey
			}
		}
	}
	if err := classify(resp, answer.Code, answer.Msg, err); err != nil {
		return "", "", err
	}
	if str(key) == "" {
		return "", "", gateway.Retry(fmt.Errorf("feishu: %s upload answered no key", msgType), 0)
	}
	if msgType == "image" {
		content, err = (&larkim.MessageImage{ImageKey: *key}).String()
	} else {
		content, err = (&larkim.MessageFile{FileKey: *key}).String()
	}
	return msgType, content, err
}

// mediaNote tells the chat that attachment name was not sent: note says
// why.
func (a *Adapter) mediaNote(ctx context.Context, msg *nanofleetv1.OutboundMessage, uuid, name, note string) error {
	a.log.Warn("feishu attachment not sent", "id", msg.GetId(), "name", name, "note", note)
	return a.send(ctx, msg, FormatText, note, uuid)
}

// fileType is im/v1/files' file_type for a file name: the document types
// it knows, else "stream" (audio and video uploaded as opus or mp4 would
// need their own message types).
func fileType(name string) string {
	switch strings.TrimPrefix(strings.ToLower(path.Ext(name)), ".") {
	case "pdf":
		return larkim.FileTypePdf
	case "doc", "docx":
		return larkim.FileTypeDoc
	case "xls", "xlsx":
		return larkim.FileTypeXls
	case "ppt", "pptx":
		return larkim.FileTypePpt
	}
	return larkim.FileTypeStream
}
