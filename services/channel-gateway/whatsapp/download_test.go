package whatsapp

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
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

// TestMediaBodiesAreLimited: a sender announces a small file and the
// media host sends a large or endless one; the gateway must stop reading
// at the limit, whatever length was announced.
func TestMediaBodiesAreLimited(t *testing.T) {
	const limit = 1000
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if r.URL.Query().Get("announce") == "yes" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		chunk := []byte(strings.Repeat("x", 512))
		for sent := 0; n < 0 || sent < n; sent += len(chunk) {
			if n >= 0 && n-sent < len(chunk) {
				chunk = chunk[:n-sent]
			}
			if _, err := w.Write(chunk); err != nil {
				return // the client stopped reading
			}
		}
	}))
	defer srv.Close()
	c := &http.Client{Transport: limitBodies{base: http.DefaultTransport.(*http.Transport).Clone(), max: limit}}
	tests := []struct {
		name     string
		query    string
		wantSize int
		wantErr  error
	}{
		{"under the limit", "n=999&announce=yes", 999, nil},
		{"at the limit, not announced", "n=1000", 1000, nil},
		{"announced over the limit", "n=5000&announce=yes", 0, media.ErrTooLarge},
		{"over the limit, not announced", "n=5000", 0, media.ErrTooLarge},
		{"endless", "n=-1", 0, media.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/?"+tt.query, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("read %d bytes, err %v; want %v", len(data), err, tt.wantErr)
			}
			if tt.wantErr == nil && len(data) != tt.wantSize {
				t.Errorf("read %d bytes, want %d", len(data), tt.wantSize)
			}
			if len(data) > limit {
				t.Errorf("read %d bytes, over the limit %d", len(data), limit)
			}
		})
	}
}
