package whatsapp

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store"
	"google.golang.org/protobuf/proto"
)

// TestMediaIsFetchedOnlyFromWhatsApp is an attack: the sender writes a
// media message, URL included, and whatsmeow downloads a URL it is given
// from any host (without a media key, as plain bytes). A message pointing
// at a host inside the gateway's network must not make the gateway fetch
// it, with or without a direct path beside the URL.
func TestMediaIsFetchedOnlyFromWhatsApp(t *testing.T) {
	var hits atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("internal secret"))
	}))
	defer internal.Close()
	tests := []struct {
		name string
		msg  whatsmeow.DownloadableMessage
	}{
		{"document with a URL only", &waE2E.DocumentMessage{
			URL: proto.String(internal.URL + "/latest/meta-data"), Mimetype: proto.String("text/plain"), FileLength: proto.Uint64(15),
		}},
		{"image with a URL beside its direct path", &waE2E.ImageMessage{
			URL: proto.String(internal.URL + "/v/t62/x.enc"), DirectPath: proto.String("/v/t62/x.enc?ccb=1"),
			Mimetype: proto.String("image/jpeg"), FileLength: proto.Uint64(15),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Never connected: a download that goes by the direct path
			// fails asking the server for its media hosts.
			c := &client{cli: whatsmeow.NewClient(&store.Device{}, nil), done: make(chan struct{})}
			data, err := c.Download(t.Context(), tt.msg)
			if err == nil {
				t.Errorf("downloaded %q", data)
			}
			if n := hits.Swap(0); n != 0 {
				t.Errorf("the gateway sent %d requests to the URL in the message", n)
			}
		})
	}
}
