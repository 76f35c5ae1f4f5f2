package feishu_test

import (
	"bytes"
	"strings"
	"testing"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu/feishutest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
)

// TestOutboundAttachmentsAreUploaded: images go to im/v1/images and
// become image messages, other files (and images over the image limit)
// go to im/v1/files and become file messages, each quoting the asking
// message after the text; what the platform cannot take becomes a text
// note, so nothing is lost silently.
func TestOutboundAttachmentsAreUploaded(t *testing.T) {
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 100)...)
	pdf := []byte("%PDF-1.4 report")
	bigPNG := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, feishu.ImageLimit)...)
	tests := []struct {
		name string
		ref  *nanofleetv1.MediaRef
		data []byte
		// upload is the upload call expected ("" none) and its form
		// fields; msgType the message that shows the attachment, note
		// a text the message must contain instead.
		upload   string
		fields   map[string]string
		msgType  string
		wantNote string
	}{
		{name: "image", ref: &nanofleetv1.MediaRef{Object: "t/chart.png", Name: "chart.png", MimeType: "image/png"}, data: png,
			upload: "image", fields: map[string]string{"image_type": "message"}, msgType: "image"},
		{name: "document", ref: &nanofleetv1.MediaRef{Object: "t/report.pdf", Name: "report.pdf", MimeType: "application/pdf"}, data: pdf,
			upload: "file", fields: map[string]string{"file_type": "pdf", "file_name": "report.pdf"}, msgType: "file"},
		{name: "image over the image limit", ref: &nanofleetv1.MediaRef{Object: "t/big.png", Name: "big.png", MimeType: "image/png"}, data: bigPNG,
			upload: "file", fields: map[string]string{"file_type": "stream", "file_name": "big.png"}, msgType: "file"},
		{name: "gone from the store", ref: &nanofleetv1.MediaRef{Object: "t/gone.txt", Name: "gone.txt"},
			wantNote: "gone.txt is no longer stored"},
		{name: "over the file limit", ref: &nanofleetv1.MediaRef{Object: "t/huge.zip", Name: "huge.zip", Size: feishu.FileLimit + 1},
			wantNote: "huge.zip is 30.0 MB, over Feishu's 30 MB limit"},
	}
	var refs []*nanofleetv1.MediaRef
	var data [][]byte
	for _, tt := range tests {
		refs, data = append(refs, tt.ref), append(data, tt.data)
	}
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.WithMedia("here", refs...))
	workertest.StoreMedia(t, h.Bus, refs, data)
	h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_ask", "files please"))
	if md := markdown(t, h.fake.Next(t, wait, "reply")); md != "here" {
		t.Fatalf("text = %q", md)
	}
	uuids := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var key string
			if tt.upload != "" {
				up := h.fake.Next(t, wait, "image", "file")
				if up.Kind != tt.upload || up.Key == "" || !bytes.Equal(up.Upload, tt.data) {
					t.Fatalf("upload = %s key %q, %d bytes; want %s of %d bytes", up.Kind, up.Key, len(up.Upload), tt.upload, len(tt.data))
				}
				for k, v := range tt.fields {
					if up.Str(k) != v {
						t.Errorf("upload field %s = %q, want %q", k, up.Str(k), v)
					}
				}
				key = up.Key
			}
			c := h.fake.Next(t, wait, "reply", "create")
			if c.Kind != "reply" || c.Parent != "om_ask" || c.Str("uuid") == "" || uuids[c.Str("uuid")] {
				t.Errorf("message %s to %q, uuid %q (seen: %v)", c.Kind, c.Parent, c.Str("uuid"), uuids[c.Str("uuid")])
			}
			uuids[c.Str("uuid")] = true
			if tt.wantNote != "" {
				if text, _ := c.Content()["text"].(string); c.Str("msg_type") != "text" || !strings.Contains(text, tt.wantNote) {
					t.Errorf("note = %s %v, want text containing %q", c.Str("msg_type"), c.Content(), tt.wantNote)
				}
				return
			}
			if c.Str("msg_type") != tt.msgType || c.Content()[tt.msgType+"_key"] != key {
				t.Errorf("message = %s %v, want %s with key %q", c.Str("msg_type"), c.Content(), tt.msgType, key)
			}
		})
	}
	gatewaytest.WaitDelivered(t, h.Bus, feishu.Channel, 1, wait)
	h.fake.None(t, "reply", "create", "image", "file")
}

// TestAttachmentRetryContinuesAfterTheText: an upload the platform rate
// limits is tried again after the wait, and the text already sent is not
// sent again.
func TestAttachmentRetryContinuesAfterTheText(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nretry")
	ref := &nanofleetv1.MediaRef{Object: "t/a.png", Name: "a.png", MimeType: "image/png"}
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.WithMedia("here", ref))
	workertest.StoreMedia(t, h.Bus, []*nanofleetv1.MediaRef{ref}, [][]byte{png})
	h.fake.Fail("image", feishutest.RateLimited(1))
	h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_ask", "a picture"))
	if md := markdown(t, h.fake.Next(t, wait, "reply")); md != "here" {
		t.Fatalf("text = %q", md)
	}
	if up := h.fake.Next(t, wait, "image"); up.Key != "" {
		t.Fatalf("first upload accepted as %q, want the scripted rate limit", up.Key)
	}
	up := h.fake.Next(t, wait, "image")
	if up.Key == "" {
		t.Fatal("upload refused again")
	}
	if c := h.fake.Next(t, wait, "reply"); c.Str("msg_type") != "image" || c.Content()["image_key"] != up.Key {
		t.Errorf("after the retry: %s %v, want the image (the text again means the retry restarted)", c.Str("msg_type"), c.Content())
	}
	gatewaytest.WaitDelivered(t, h.Bus, feishu.Channel, 1, wait)
	h.fake.None(t, "reply", "create", "image", "file")
}
