package slack_test

import (
	"fmt"
	"strings"
	"testing"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack/slacktest"
)

// sends are the calls that post a message or take part in uploading a
// file, in the order a reply makes them.
var sends = []string{"chat.postMessage", "files.getUploadURLExternal", slacktest.Upload, "files.completeUploadExternal"}

// describe says what a call of sends did, for comparing a reply's calls
// with those wanted in one line each.
func describe(c slacktest.Call) string {
	switch c.Method {
	case "chat.postMessage":
		return fmt.Sprintf("post %q in %s/%s", c.Fields["text"], c.Fields["channel"], c.Fields["thread_ts"])
	case "files.getUploadURLExternal":
		return fmt.Sprintf("reserve %s of %s bytes", c.Fields["filename"], c.Fields["length"])
	case slacktest.Upload:
		if len(c.Files) == 0 {
			return "upload refused"
		}
		return fmt.Sprintf("upload %s %q", c.Files[0].Name, c.Files[0].Data)
	}
	var shared []string
	for _, f := range c.Files {
		shared = append(shared, fmt.Sprintf("%s %q titled %q in %s/%s", f.Name, f.Data, f.Title, f.Channel, f.ThreadTS))
	}
	return "share " + strings.Join(shared, ", ")
}

// expectSends waits for the calls wanted, in order, and, once the one
// reply is delivered, checks there were no more.
func (h *harness) expectSends(t *testing.T, want ...string) {
	t.Helper()
	for i, w := range want {
		if got := describe(h.fake.Next(t, wait, sends...)); got != w {
			t.Fatalf("call %d: %s\nwant %s", i, got, w)
		}
	}
	gatewaytest.WaitDelivered(t, h.Bus, slack.Channel, 1, wait)
	h.fake.None(t, sends...)
}

// TestOutboundAttachmentIsUploaded: a reply's file is uploaded after its
// text, with its bytes and name, into the reply's thread (Slack's three
// steps, the deprecated files.upload never); a link is posted there as
// text, escaped as all text sent to Slack.
func TestOutboundAttachmentIsUploaded(t *testing.T) {
	img := []byte("\x89PNG\r\n\x1a\n\x00chart")
	refs := []*nanofleetv1.MediaRef{
		{Object: "t/chart.png", Name: "chart.png", MimeType: "image/png"},
		{Url: "https://example.com/report?q=1&r=2"},
	}
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.WithMedia("here", refs...))
	workertest.StoreMedia(t, h.Bus, refs, [][]byte{img, nil})
	h.fake.Send(t, "Ev1", slacktest.AppMention("U1", "C1", "5.5", "<@UBOT> a chart please"))
	h.expectSends(t,
		`post "here" in C1/5.5`,
		fmt.Sprintf("reserve chart.png of %d bytes", len(img)),
		fmt.Sprintf("upload chart.png %q", img),
		fmt.Sprintf("share chart.png %q titled %q in C1/5.5", img, "chart.png"),
		`post "https://example.com/report?q=1&amp;r=2" in C1/5.5`,
	)
}

// TestUnsendableAttachmentIsANote: an attachment the store no longer
// holds, an empty one, or one announced over [slack.UploadLimit] can
// never be sent, so it is not retried and not uploaded: the thread gets
// the text, a note naming the attachment and the next attachment, each
// once.
func TestUnsendableAttachmentIsANote(t *testing.T) {
	doc := []byte("%PDF-1.4 b")
	tests := []struct {
		name string
		ref  *nanofleetv1.MediaRef
		data []byte // stored; nil: none
		note string
	}{
		{"gone from the store", &nanofleetv1.MediaRef{Object: "t/gone.pdf", Name: "gone.pdf", MimeType: "application/pdf"}, nil,
			"[attachment gone.pdf is no longer stored; not sent]"},
		{"empty", &nanofleetv1.MediaRef{Object: "t/empty.txt", Name: "empty.txt", MimeType: "text/plain"}, []byte{},
			"[attachment empty.txt is empty; not sent]"},
		{"over the upload limit", &nanofleetv1.MediaRef{Object: "t/huge.zip", Name: "huge.zip", MimeType: "application/zip", Size: slack.UploadLimit + 1}, []byte("PK"),
			"[attachment huge.zip is 50.0 MB, over Slack's 50 MB limit; not sent]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refs := []*nanofleetv1.MediaRef{tt.ref, {Object: "t/b.pdf", Name: "b.pdf", MimeType: "application/pdf"}}
			h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.WithMedia("here", refs...))
			workertest.StoreMedia(t, h.Bus, refs, [][]byte{tt.data, doc})
			h.fake.Send(t, "Ev1", slacktest.AppMention("U1", "C1", "5.5", "<@UBOT> two files please"))
			h.expectSends(t,
				`post "here" in C1/5.5`,
				fmt.Sprintf("post %q in C1/5.5", tt.note),
				"reserve b.pdf of 10 bytes",
				fmt.Sprintf("upload b.pdf %q", doc),
				fmt.Sprintf("share b.pdf %q titled %q in C1/5.5", doc, "b.pdf"),
			)
		})
	}
}

// TestAttachmentFailures: a reply's attachments are counted as pieces
// after its text, so the retry after a transient failure (a 5xx from the
// upload URL, a rate limit) uploads again only the attachment it stopped
// (a file reserved or uploaded but never shared stays private, unseen);
// an upload Slack refuses, by an error code or a 4xx, is not retried:
// the thread is told and the reply goes on.
func TestAttachmentFailures(t *testing.T) {
	refs := []*nanofleetv1.MediaRef{
		{Object: "t/a.pdf", Name: "a.pdf", MimeType: "application/pdf"},
		{Object: "t/b.pdf", Name: "b.pdf", MimeType: "application/pdf"},
	}
	data := [][]byte{[]byte("%PDF-1.4 a"), []byte("%PDF-1.4 b")}
	reserve := func(name string) string { return fmt.Sprintf("reserve %s of 10 bytes", name) }
	upload := func(i int) string { return fmt.Sprintf("upload %s %q", refs[i].GetName(), data[i]) }
	share := func(i int) string {
		return fmt.Sprintf("share %s %q titled %q in C1/5.5", refs[i].GetName(), data[i], refs[i].GetName())
	}
	refused := `post "[attachment a.pdf was refused by Slack; not sent]" in C1/5.5`
	tests := []struct {
		name   string
		method string // the call that fails
		passed int    // calls of method answered before the failure
		fail   slacktest.Failure
		want   []string
	}{
		{"second upload failing once", slacktest.Upload, 1, slacktest.Failure{Status: 500},
			[]string{reserve("a.pdf"), upload(0), share(0), reserve("b.pdf"), "upload refused", reserve("b.pdf"), upload(1), share(1)}},
		{"sharing rate limited", "files.completeUploadExternal", 0, slacktest.Failure{Status: 429, RetryAfter: 1},
			[]string{reserve("a.pdf"), upload(0), "share ", reserve("a.pdf"), upload(0), share(0), reserve("b.pdf"), upload(1), share(1)}},
		{"first upload refused by its workspace", "files.getUploadURLExternal", 0, slacktest.Failure{Error: "file_upload_size_restricted"},
			[]string{reserve("a.pdf"), refused, reserve("b.pdf"), upload(1), share(1)}},
		{"first upload refused by the upload URL", slacktest.Upload, 0, slacktest.Failure{Status: 413},
			[]string{reserve("a.pdf"), "upload refused", refused, reserve("b.pdf"), upload(1), share(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.WithMedia("here", refs...))
			workertest.StoreMedia(t, h.Bus, refs, data)
			h.fake.Pass(tt.method, tt.passed)
			h.fake.Fail(tt.method, tt.fail)
			h.fake.Send(t, "Ev1", slacktest.AppMention("U1", "C1", "5.5", "<@UBOT> two files please"))
			h.expectSends(t, append([]string{`post "here" in C1/5.5`}, tt.want...)...)
		})
	}
}
