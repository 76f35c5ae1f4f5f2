package telegram_test

import (
	"bytes"
	"testing"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram/telegramtest"
)

// TestAttachmentLimits: an image goes as a photo up to the Bot API's
// photo limit and as a document above it; a file announced over the
// document limit is never uploaded (nor read): the chat gets a plain-text
// note naming it and the limit instead, and the reply goes on.
func TestAttachmentLimits(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nsmall")
	bigPNG := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, telegram.PhotoLimit)...)
	tests := []struct {
		name string
		ref  *nanofleetv1.MediaRef
		data []byte
		// method is the call expected; field the uploaded file's form
		// field, or text the note sent instead.
		method, field, text string
	}{
		{"image", &nanofleetv1.MediaRef{Object: "t/chart.png", Name: "chart.png", MimeType: "image/png"}, png,
			"sendPhoto", "photo", ""},
		{"image over the photo limit", &nanofleetv1.MediaRef{Object: "t/big.png", Name: "big.png", MimeType: "image/png"}, bigPNG,
			"sendDocument", "document", ""},
		{"over the document limit", &nanofleetv1.MediaRef{Object: "t/huge.zip", Name: "huge.zip", MimeType: "application/zip", Size: telegram.DocumentLimit + 1}, []byte("PK"),
			"sendMessage", "", "[attachment huge.zip is 50.0 MB, over Telegram's 50 MB limit; not sent]"},
	}
	var refs []*nanofleetv1.MediaRef
	var data [][]byte
	for _, tt := range tests {
		refs, data = append(refs, tt.ref), append(data, tt.data)
	}
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.WithMedia("here", refs...))
	workertest.StoreMedia(t, h.Bus, refs, data)
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: 8, FromID: 8, Text: "files please"})
	h.expectText(t, "here")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := h.fake.Next(t, wait, "sendMessage", "sendDocument", "sendPhoto")
			switch {
			case c.Method != tt.method:
				t.Fatalf("call %s %q with %d files; want %s", c.Method, c.Fields["text"], len(c.Files), tt.method)
			case tt.field != "" && !bytes.Equal(c.Files[tt.field], tt.data):
				t.Errorf("%s uploaded %d bytes as %q; want the %d bytes stored", c.Method, len(c.Files[tt.field]), tt.field, len(tt.data))
			case c.Fields["text"] != tt.text || c.Fields["parse_mode"] != "":
				t.Errorf("%s text %q (%q), want %q in plain text", c.Method, c.Fields["text"], c.Fields["parse_mode"], tt.text)
			}
		})
	}
	gatewaytest.WaitDelivered(t, h.Bus, telegram.Channel, 1, wait)
	h.fake.None(t, "sendMessage", "sendDocument", "sendPhoto")
}
