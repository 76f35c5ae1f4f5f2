package dingtalk_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
)

// attachmentReply is a worker script answering "here" with refs, after
// storing data under their objects (nil data: not stored).
func attachmentReply(t *testing.T, h **harness, refs []*nanofleetv1.MediaRef, data [][]byte) workertest.Script {
	return func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		blobs, err := (*h).bus.Blobs(t.Context())
		if err != nil {
			t.Error(err)
		}
		for i, d := range data {
			if d != nil {
				if _, err := blobs.PutBytes(t.Context(), refs[i].GetObject(), d); err != nil {
					t.Error(err)
				}
			}
		}
		m := workertest.Final("here")
		m.Media = refs
		return []*nanofleetv1.OutboundMessage{m}
	}
}

// TestOutboundAttachmentsAreUploaded: after the text (by session
// webhook), pictures and files are uploaded with media/upload and sent by
// the robot API as sampleImageMsg and sampleFile naming the media id, in
// a group by its conversation id; what DingTalk cannot take becomes a
// text note, so nothing is lost silently.
func TestOutboundAttachmentsAreUploaded(t *testing.T) {
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 100)...)
	pdf := []byte("%PDF-1.4 report")
	tests := []struct {
		name string
		ref  *nanofleetv1.MediaRef
		data []byte
		// upload is the media type uploaded ("" none); msgKey and param
		// the robot message that shows it (the media id checked apart),
		// note a text the message must contain instead.
		upload string
		msgKey string
		param  map[string]string
		note   string
	}{
		{name: "picture", ref: &nanofleetv1.MediaRef{Object: "t/chart.png", Name: "chart.png", MimeType: "image/png"}, data: png,
			upload: "image", msgKey: "sampleImageMsg"},
		{name: "document", ref: &nanofleetv1.MediaRef{Object: "t/report.pdf", Name: "report.pdf", MimeType: "application/pdf"}, data: pdf,
			upload: "file", msgKey: "sampleFile", param: map[string]string{"fileName": "report.pdf", "fileType": "pdf"}},
		{name: "a type robots cannot send", ref: &nanofleetv1.MediaRef{Object: "t/notes.txt", Name: "notes.txt", MimeType: "text/plain"}, data: []byte("hi"),
			note: "notes.txt is a kind of file DingTalk robots cannot send"},
		{name: "over the limit", ref: &nanofleetv1.MediaRef{Object: "t/huge.zip", Name: "huge.zip", Size: dingtalk.MediaLimit + 1},
			note: "huge.zip is over DingTalk's 20 MB limit"},
		{name: "gone from the store", ref: &nanofleetv1.MediaRef{Object: "t/gone.pdf", Name: "gone.pdf"},
			note: "gone.pdf is no longer stored"},
	}
	var refs []*nanofleetv1.MediaRef
	var data [][]byte
	for _, tt := range tests {
		refs, data = append(refs, tt.ref), append(data, tt.data)
	}
	var h *harness
	h = start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, GroupPolicy: dingtalk.GroupOpen}}, attachmentReply(t, &h, refs, data))
	h.fake.Send(t, group("msg-1", "staff-ada", "files please", false))
	if c := h.fake.Next(t, wait, "webhook", "otosend", "groupsend"); c.Kind != "webhook" {
		t.Fatalf("text went by %s, want the session webhook", c.Kind)
	} else if _, text := c.Markdown(); text != "here" {
		t.Fatalf("text = %q", text)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var id string
			if tt.upload != "" {
				up := h.fake.Next(t, wait, "upload")
				if up.Str("type") != tt.upload || up.MediaID == "" || !bytes.Equal(up.Upload, tt.data) || up.Str("filename") != tt.ref.GetName() {
					t.Fatalf("upload = %s %q as %q, %d bytes; want %s %q of %d bytes", up.Str("type"), up.Str("filename"), up.MediaID, len(up.Upload), tt.upload, tt.ref.GetName(), len(tt.data))
				}
				id = up.MediaID
			}
			c := h.fake.Next(t, wait, "webhook", "otosend", "groupsend")
			if tt.note != "" {
				text, _ := c.Body["text"].(map[string]any)["content"].(string)
				if c.Kind == "groupsend" {
					text = c.Param()["content"]
				}
				if !strings.Contains(text, tt.note) {
					t.Errorf("note by %s = %v, want text containing %q", c.Kind, c.Body, tt.note)
				}
				return
			}
			p := c.Param()
			if c.Kind != "groupsend" || c.Str("openConversationId") != "cidGroup1" || c.Str("msgKey") != tt.msgKey {
				t.Fatalf("sent by %s to %q as %q, want groupsend to cidGroup1 as %s", c.Kind, c.Str("openConversationId"), c.Str("msgKey"), tt.msgKey)
			}
			if got := p["photoURL"] + p["mediaId"]; got != id {
				t.Errorf("message names media %q, want %q", got, id)
			}
			for k, v := range tt.param {
				if p[k] != v {
					t.Errorf("msgParam %s = %q, want %q", k, p[k], v)
				}
			}
		})
	}
	h.waitDelivered(t, 1)
	h.fake.None(t, 300*time.Millisecond, "webhook", "otosend", "groupsend", "upload")
}
