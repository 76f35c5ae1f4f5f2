package dingtalk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strings"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

// MediaLimit is the media upload's limit for images and files.
const MediaLimit = 20 << 20

// The formats a robot can send: pictures as sampleImageMsg, documents and
// archives as sampleFile (its fileType is the extension).
var (
	imageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/bmp": true}
	fileTypes  = map[string]bool{"doc": true, "docx": true, "xls": true, "xlsx": true, "ppt": true, "pptx": true, "zip": true, "pdf": true, "rar": true}
)

// sendMedia sends one attachment of a reply from the object store through
// the robot API (a session webhook takes no pictures or files): uploaded
// with media/upload, then a sampleImageMsg whose photoURL is the media id,
// or a sampleFile. An attachment DingTalk cannot take (a format robots do
// not send, over [MediaLimit], empty, refused) or the store no longer
// holds becomes a text message naming it (internal/media's Load and
// Note), so the reply still arrives and the user knows what is missing.
func (a *Adapter) sendMedia(ctx context.Context, msg *nanofleetv1.OutboundMessage, m *nanofleetv1.MediaRef) error {
	name := media.Name(m)
	ext := strings.TrimPrefix(strings.ToLower(path.Ext(name)), ".")
	image := imageTypes[strings.ToLower(m.GetMimeType())]
	if m.GetObject() != "" && !image && !fileTypes[ext] { // known before reading it
		return a.mediaNote(ctx, msg, name, media.Note(name, "is a kind of file DingTalk robots cannot send"))
	}
	f, err := a.media.Load(ctx, m, "DingTalk", MediaLimit)
	switch {
	case err != nil || f == nil:
		return err
	case f.Note != "":
		return a.mediaNote(ctx, msg, f.Name, f.Note)
	case f.URL != "":
		return a.send(ctx, msg, "text", f.URL)
	}
	kind := "file"
	if image {
		kind = "image"
	}
	id, err := a.upload(ctx, kind, f.Name, f.Data)
	if retry, _ := gateway.Retryable(err); err != nil && !retry {
		a.log.Warn("dingtalk refused an attachment", "id", msg.GetId(), "name", f.Name, "err", err)
		return a.mediaNote(ctx, msg, f.Name, media.Note(f.Name, "was refused by DingTalk"))
	}
	if err != nil {
		return err
	}
	if image {
		return a.robotSend(ctx, msg.GetChatId(), "sampleImageMsg", map[string]string{"photoURL": id})
	}
	return a.robotSend(ctx, msg.GetChatId(), "sampleFile", map[string]string{"mediaId": id, "fileName": f.Name, "fileType": ext})
}

// mediaNote tells the chat that attachment name was not sent: note says
// why.
func (a *Adapter) mediaNote(ctx context.Context, msg *nanofleetv1.OutboundMessage, name, note string) error {
	a.log.Warn("dingtalk attachment not sent", "id", msg.GetId(), "name", name, "note", note)
	return a.send(ctx, msg, "text", note)
}

// Media upload errcodes worth another try: system busy, and the rate
// limits.
var uploadTransient = map[int]bool{-1: true, 90002: true, 90018: true}

// upload stores data with media/upload as kind ("image" or "file") and
// returns its media id.
func (a *Adapter) upload(ctx context.Context, kind, name string, data []byte) (string, error) {
	tok, err := a.accessToken(ctx)
	if err != nil {
		return "", err
	}
	var body bytes.Buffer
	form := multipart.NewWriter(&body)
	part, err := form.CreateFormFile("media", name)
	if err == nil {
		_, err = part.Write(data)
	}
	if err == nil {
		err = form.Close()
	}
	if err != nil {
		return "", gateway.Permanent(fmt.Errorf("dingtalk: media form: %w", err))
	}
	q := url.Values{"access_token": {tok}, "type": {kind}}
	resp, raw, err := a.post(ctx, "media upload", a.cfg.oapiURL()+"/media/upload?"+q.Encode(), form.FormDataContentType(), &body, nil)
	if err != nil {
		return "", err
	}
	var out struct {
		oapiAnswer
		MediaID string `json:"media_id"`
	}
	jerr := json.Unmarshal(raw, &out)
	if resp.StatusCode == http.StatusOK && jerr == nil && out.ErrCode == 0 && out.MediaID != "" {
		return out.MediaID, nil
	}
	e := fmt.Errorf("dingtalk: media upload: HTTP %d, errcode %d: %s", resp.StatusCode, out.ErrCode, out.ErrMsg)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return "", gateway.Retry(e, max(retryAfter(resp.Header), sendTooFastWait))
	case resp.StatusCode >= 500 || uploadTransient[out.ErrCode] || (resp.StatusCode == http.StatusOK && out.ErrCode == 0):
		return "", gateway.Retry(e, 0) // includes an answer without a media id
	case out.ErrCode == 40014 || out.ErrCode == 42001: // token invalid or expired
		a.mu.Lock()
		a.token = "" // fetched again on the retry
		a.mu.Unlock()
		return "", gateway.Retry(e, 0)
	}
	return "", gateway.Permanent(e)
}
