package discord_test

import (
	"bytes"
	"maps"
	"testing"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
)

// TestOversizedAttachmentIsANote: a file announced over Discord's upload
// limit is never uploaded (nor read): the chat gets the text, a note
// naming the file and the limit, and the next attachment, each once.
func TestOversizedAttachmentIsANote(t *testing.T) {
	refs := []*nanofleetv1.MediaRef{
		{Object: "t/huge.zip", Name: "huge.zip", MimeType: "application/zip", Size: discord.UploadLimit + 1},
		{Object: "t/b.pdf", Name: "b.pdf", MimeType: "application/pdf"},
	}
	doc := []byte("%PDF-1.4 b")
	h := start(t, discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.WithMedia("here", refs...))
	workertest.StoreMedia(t, h.Bus, refs, [][]byte{[]byte("PK"), doc})
	h.fake.Send(h.dm("600000000000000001", "two files please"))
	want := []struct {
		text  string
		files map[string][]byte
	}{
		{"here", nil},
		{"[attachment huge.zip is 25.0 MB, over Discord's 25 MB limit; not sent]", nil},
		{"", map[string][]byte{"b.pdf": doc}},
	}
	for i, w := range want {
		c := h.fake.Next(t, wait, create)
		if c.Content() != w.text || !maps.EqualFunc(c.Files, w.files, bytes.Equal) || c.Status != 200 || c.Duplicate {
			t.Fatalf("request %d: %q with files %q, status %d, duplicate %v; want %q with %q, status 200",
				i, c.Content(), c.Files, c.Status, c.Duplicate, w.text, w.files)
		}
	}
	h.fake.None(t, 300*time.Millisecond, create)
}
