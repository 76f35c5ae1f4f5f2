package whatsapp_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp/whatsapptest"
)

const wait = 10 * time.Second

type harness struct {
	srv    *bustest.Server
	fake   *whatsapptest.Server
	logs   *gatewaytest.Logs
	bus    *bus.Bus
	worker *workertest.Worker
}

// start runs the fake worker and one gateway, and links the account.
func start(t *testing.T, cfg whatsapp.Config, script workertest.Script) *harness {
	t.Helper()
	h := newHarness(t, script)
	h.gateway(t, cfg)
	h.fake.Scan(t, wait)
	return h
}

// newHarness starts JetStream and the fake worker, with no gateway.
func newHarness(t *testing.T, script workertest.Script) *harness {
	t.Helper()
	h := &harness{fake: whatsapptest.New(), srv: bustest.StartServer(t), logs: &gatewaytest.Logs{}}
	h.bus = h.srv.Connect(t, "", channels.Assets)
	h.worker = workertest.Start(t, h.bus, script)
	return h
}

// gateway runs one more gateway with a WhatsApp adapter on the harness's
// bus and fake; it stops when stop is called or the test ends.
func (h *harness) gateway(t *testing.T, cfg whatsapp.Config) (stop func()) {
	t.Helper()
	stop, _, _ = h.gatewayOn(t, h.bus, cfg)
	return stop
}

// gatewayOn runs a gateway on its own connection b; kill closes the
// connection before stopping it, so that it cannot release its lease, as
// when its process dies.
func (h *harness) gatewayOn(t *testing.T, b *bus.Bus, cfg whatsapp.Config) (stop, kill func(), a *whatsapp.Adapter) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	g, a := runAdapter(t, b, h.fake, cfg, log)
	return g.Stop, g.Kill, a
}

// runAdapter runs a gateway with a WhatsApp adapter on b against fake.
func runAdapter(t *testing.T, b *bus.Bus, fake *whatsapptest.Server, cfg whatsapp.Config, log *slog.Logger) (*gatewaytest.Gateway, *whatsapp.Adapter) {
	t.Helper()
	cfg.Enabled = true
	return adaptertest.StartGateway(t, b, log, func(ctx context.Context, deps adapterdeps.Deps, log *slog.Logger) (*whatsapp.Adapter, error) {
		return whatsapp.New(ctx, cfg, deps, whatsapp.WithLogger(log), whatsapp.WithDialer(fake.Dial))
	})
}

func TestDirectMessage(t *testing.T) {
	h := start(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"15550001"}}}, func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final("## Hi\n\n**hello** ~~old~~ `" + in.GetContent() + "`")}
	})
	h.fake.Emit(whatsapptest.DM("3EB0A1", "15550001", " hello "))
	in := h.worker.Next(t)
	if in.GetId() != "3EB0A1" || in.GetChatId() != "15550001@s.whatsapp.net" || in.GetSenderId() != "15550001" || in.GetContent() != "hello" {
		t.Errorf("inbound = %v", in)
	}
	s := h.fake.Next(t, wait)
	if s.To.String() != "15550001@s.whatsapp.net" || s.Msg.GetConversation() != "*Hi*\n\n*hello* ~old~ `hello`" {
		t.Errorf("reply to %s: %v", s.To, s.Msg)
	}
	// Composing while the turn runs, paused after the answer.
	var seen []bool
	for len(seen) < 2 {
		select {
		case p := <-h.fake.Presence:
			if p.Chat.String() == "15550001@s.whatsapp.net" {
				seen = append(seen, p.On)
			}
		case <-time.After(wait):
			t.Fatalf("presence seen: %v", seen)
		}
	}
	if !seen[0] || seen[len(seen)-1] {
		t.Errorf("presence = %v, want composing then paused", seen)
	}
}

// TestTextThatIsNotUTF8 is a message whose text and sender's name are
// not UTF-8 (WhatsApp's proto2 does not check): it reaches the worker
// with U+FFFD in their place. Before, the gateway could not encode it,
// never acknowledged it and got it again at every connection.
func TestTextThatIsNotUTF8(t *testing.T) {
	h := start(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return nil
	})
	e := whatsapptest.DM("3EB0B1", "15550002", "hello \xff\xfe world")
	e.Info.PushName = "Bob \xc3"
	h.fake.Emit(e)
	in := h.worker.Next(t)
	if in.GetId() != "3EB0B1" || in.GetContent() != "hello \uFFFD world" || in.GetMetadata()["push_name"] != "Bob \uFFFD" {
		t.Errorf("inbound id %q content %q push name %q", in.GetId(), in.GetContent(), in.GetMetadata()["push_name"])
	}
}

// TestGroupAnswerQuotesTheMessage: an answer in a group quotes the
// message it answers, a direct answer nothing (adaptertest's GroupPolicy
// covers the policies).
func TestGroupAnswerQuotesTheMessage(t *testing.T) {
	h := start(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, GroupPolicy: channelconfig.GroupOpen}}, workertest.Echo)
	h.fake.Emit(whatsapptest.Group("3EB0G", "1203630001", "15550001", "chatter", false))
	h.fake.Emit(whatsapptest.DM("3EB0S", "15550001", "sentinel"))
	for range 2 {
		s := h.fake.Next(t, wait)
		if s.To.Server != types.GroupServer {
			if s.Text() != "echo: sentinel" || s.Msg.GetExtendedTextMessage() != nil {
				t.Errorf("direct reply = %v", s.Msg)
			}
			continue
		}
		x := s.Msg.GetExtendedTextMessage()
		ci := x.GetContextInfo()
		if s.To.String() != "1203630001@g.us" || !strings.HasSuffix(x.GetText(), "chatter") || ci.GetStanzaID() != "3EB0G" ||
			ci.GetParticipant() != "15550001@s.whatsapp.net" || !strings.HasSuffix(ci.GetQuotedMessage().GetConversation(), "chatter") {
			t.Errorf("group reply = %v", s.Msg)
		}
	}
}

func TestReplyToTheAccountCountsAsMention(t *testing.T) {
	h := start(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	group, from := types.NewJID("1203630001", types.GroupServer), types.NewJID("15550001", types.DefaultUserServer)
	h.fake.Emit(whatsapptest.Message("3EB0Q", group, from, &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text: proto.String("and why?"),
		ContextInfo: &waE2E.ContextInfo{
			StanzaID: proto.String("3EB0OURS"), Participant: proto.String(whatsapptest.Account.String()),
			QuotedMessage: &waE2E.Message{Conversation: proto.String("the sky is blue")},
		},
	}}))
	in := h.worker.Next(t)
	if in.GetContent() != "> the sky is blue\n\nand why?" || in.GetMetadata()["reply_to_id"] != "3EB0OURS" {
		t.Errorf("inbound = %q %v", in.GetContent(), in.GetMetadata())
	}
}

func TestMediaGoesToTheObjectStore(t *testing.T) {
	h := start(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.File("/v/photo", []byte("jpeg bytes"))
	h.fake.File("/v/voice", []byte("ogg bytes"))
	from := types.NewJID("15550001", types.DefaultUserServer)
	h.fake.Emit(whatsapptest.Message("3EB0I", from, from, &waE2E.Message{ImageMessage: &waE2E.ImageMessage{
		Caption: proto.String("look"), Mimetype: proto.String("image/jpeg"), DirectPath: proto.String("/v/photo"), FileLength: proto.Uint64(10),
	}}))
	h.fake.Emit(whatsapptest.Message("3EB0V", from, from, &waE2E.Message{AudioMessage: &waE2E.AudioMessage{
		PTT: proto.Bool(true), Mimetype: proto.String("audio/ogg; codecs=opus"), DirectPath: proto.String("/v/voice"), FileLength: proto.Uint64(9),
	}}))
	for _, want := range []struct{ content, name, data string }{{"look", "image.jpg", "jpeg bytes"}, {"", "voice.ogg", "ogg bytes"}} {
		in := h.worker.Next(t)
		ref, data := adaptertest.Stored(t, h.bus, in)
		if in.GetContent() != want.content || ref.GetName() != want.name || string(data) != want.data {
			t.Errorf("inbound %q with %s = %q, want %q with %s = %q", in.GetContent(), ref.GetName(), data, want.content, want.name, want.data)
		}
	}
}

// TestMediaOfOthersAreNotOverwritten is an attack: a WhatsApp message id
// is chosen by the sender's client, and ids are seen by everyone in a
// group. A stranger who sends media under the id of Ada's message must
// not replace what Ada's message refers to in the object store.
func TestMediaOfOthersAreNotOverwritten(t *testing.T) {
	h := start(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.File("/v/ada", []byte("ada's photo"))
	h.fake.File("/v/mallory", []byte("mallory's photo"))
	ada, mallory := types.NewJID("15550001", types.DefaultUserServer), types.NewJID("15550066", types.DefaultUserServer)
	image := func(path string) *waE2E.Message {
		return &waE2E.Message{ImageMessage: &waE2E.ImageMessage{Mimetype: proto.String("image/jpeg"), DirectPath: proto.String(path), FileLength: proto.Uint64(11)}}
	}
	h.fake.Emit(whatsapptest.Message("3EB0ADA", ada, ada, image("/v/ada")))
	in := h.worker.Next(t)
	h.fake.Emit(whatsapptest.Message("3EB0ADA", mallory, mallory, image("/v/mallory")))
	h.fake.Emit(whatsapptest.DM("3EB0END", "15550066", "sentinel"))
	h.worker.ContentsUntil(t, "sentinel", wait) // Mallory's message was handled
	if _, data := adaptertest.Stored(t, h.bus, in); string(data) != "ada's photo" {
		t.Errorf("Ada's attachment now holds %q", data)
	}
}

func TestAttachmentsAreSent(t *testing.T) {
	h := newHarness(t, func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		out := workertest.Final("here you are: " + in.GetContent())
		out.Media = []*nanofleetv1.MediaRef{
			{Object: "out/chart", Name: "chart.png", MimeType: "image/png"},
			{Object: "out/report", Name: "report.pdf", MimeType: "application/pdf"},
			{Object: "out/missing", Name: "gone.txt", MimeType: "text/plain"},
		}
		return []*nanofleetv1.OutboundMessage{out}
	})
	blobs, err := h.bus.Blobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"out/chart": "png bytes", "out/report": "pdf bytes"} {
		if _, err := blobs.PutBytes(t.Context(), name, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	h.gateway(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	h.fake.Scan(t, wait)
	h.fake.Emit(whatsapptest.DM("3EB0M", "15550001", "send the files"))
	if s := h.fake.Next(t, wait); s.Text() != "here you are: send the files" {
		t.Errorf("first = %v", s.Msg)
	}
	img := h.fake.Next(t, wait).Msg.GetImageMessage()
	if img == nil || img.GetMimetype() != "image/png" || string(h.fake.Uploaded(img.GetDirectPath())) != "png bytes" || len(img.GetMediaKey()) == 0 {
		t.Errorf("image = %v", img)
	}
	doc := h.fake.Next(t, wait).Msg.GetDocumentMessage()
	if doc == nil || doc.GetFileName() != "report.pdf" || string(h.fake.Uploaded(doc.GetDirectPath())) != "pdf bytes" {
		t.Errorf("document = %v", doc)
	}
	// The missing object is a note in the chat, not retried: the next
	// thing sent answers the next message.
	if s := h.fake.Next(t, wait); s.Text() != "[attachment gone.txt is no longer stored; not sent]" {
		t.Errorf("for the missing attachment: %v", s.Msg)
	}
	h.fake.Emit(whatsapptest.DM("3EB0N", "15550001", "sentinel"))
	if s := h.fake.Next(t, wait); s.Text() != "here you are: sentinel" {
		t.Errorf("after the attachments: %v", s.Msg)
	}
}

// TestOversizedAttachmentIsANote: an attachment announced over
// [whatsapp.UploadLimit] is neither read nor uploaded: the chat gets a
// note naming it and the limit, and the next attachment follows.
func TestOversizedAttachmentIsANote(t *testing.T) {
	refs := []*nanofleetv1.MediaRef{
		{Object: "out/huge", Name: "huge.zip", MimeType: "application/zip", Size: whatsapp.UploadLimit + 1},
		{Object: "out/report", Name: "report.pdf", MimeType: "application/pdf"},
	}
	h := newHarness(t, workertest.WithMedia("here", refs...))
	workertest.StoreMedia(t, h.bus, refs, [][]byte{[]byte("PK"), []byte("pdf bytes")})
	h.gateway(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	h.fake.Scan(t, wait)
	h.fake.Emit(whatsapptest.DM("3EB0M", "15550001", "send the files"))
	if s := h.fake.Next(t, wait); s.Text() != "here" {
		t.Errorf("first = %v", s.Msg)
	}
	if s := h.fake.Next(t, wait); s.Text() != "[attachment huge.zip is 50.0 MB, over WhatsApp's 50 MB limit; not sent]" {
		t.Errorf("for the oversized attachment: %v", s.Msg)
	}
	doc := h.fake.Next(t, wait).Msg.GetDocumentMessage()
	if doc == nil || doc.GetFileName() != "report.pdf" || string(h.fake.Uploaded(doc.GetDirectPath())) != "pdf bytes" {
		t.Errorf("document = %v", doc)
	}
}

func TestLinkingIsReportedAndStoredInTheFleet(t *testing.T) {
	h := newHarness(t, workertest.Echo)
	board, err := status.Open(t.Context(), h.bus)
	if err != nil {
		t.Fatal(err)
	}
	updates, err := board.Watch(t.Context(), whatsapp.Channel, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := h.gateway(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	next := func(want status.State) status.Record {
		t.Helper()
		for {
			select {
			case r := <-updates:
				if r.State == want && (want != status.Linking || r.QR != "") {
					return r
				}
			case <-time.After(wait):
				t.Fatalf("status never became %s", want)
			}
		}
	}
	r := next(status.Linking)
	if !strings.HasPrefix(r.QR, "2@fake-qr-") || r.Holder == "" || r.Lease == "" {
		t.Errorf("linking record = %+v", r)
	}
	h.fake.Scan(t, wait)
	if r := next(status.Connected); r.Account != "+"+whatsapptest.Phone || r.QR != "" {
		t.Errorf("linked record = %+v", r)
	}
	// A new gateway finds the link in the fleet and connects without a
	// QR code.
	stop()
	next(status.Stopped)
	h.gateway(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	// Connected first: the fake hands a message to whichever connection
	// is active, and the stopped gateway's could still be (a stress run
	// of two suites side by side saw nothing sent).
	next(status.Connected)
	h.fake.Emit(whatsapptest.DM("3EB0A", "15550001", "remember me?"))
	if s := h.fake.Next(t, wait); s.Text() != "echo: remember me?" || s.Conn != 2 {
		t.Errorf("after restart: %q from connection %d", s.Text(), s.Conn)
	}
}

func TestLoggedOutDeviceIsLinkedAgain(t *testing.T) {
	h := start(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	board, err := status.Open(t.Context(), h.bus)
	if err != nil {
		t.Fatal(err)
	}
	h.fake.LogOut()
	// The old keys are forgotten: the next connection shows a QR code
	// and, scanned, works again.
	h.fake.Scan(t, wait)
	h.fake.Emit(whatsapptest.DM("3EB0L2", "15550001", "back?"))
	if s := h.fake.Next(t, wait); s.Text() != "echo: back?" || s.Conn != 2 {
		t.Errorf("after relinking: %q from connection %d", s.Text(), s.Conn)
	}
	recs, err := board.Records(t.Context(), whatsapp.Channel)
	if err != nil || len(recs) != 1 || recs[0].State != status.Connected || recs[0].Account != "+"+whatsapptest.Phone {
		t.Errorf("status after relinking = %+v, %v", recs, err)
	}
}

func TestConfigValidation(t *testing.T) {
	ok := whatsapp.Config{Common: channelconfig.Common{Enabled: true}}
	own := []adaptertest.ConfigCase[whatsapp.Config]{
		{Name: "account with a dot", Change: func(c *whatsapp.Config) { c.Account = "a.b" }, Key: "channels.whatsapp.account"},
		{Name: "account lid", Change: func(c *whatsapp.Config) { c.Account = "lid" }, Key: "channels.whatsapp.account"},
		{Name: "dm policy", Change: func(c *whatsapp.Config) { c.DMPolicy = "maybe" }, Key: "channels.whatsapp.dmPolicy"},
		{Name: "max media bytes", Change: func(c *whatsapp.Config) { c.MaxMediaBytes = -1 }, Key: "channels.whatsapp.maxMediaBytes"},
		{Name: "disabled ignores a bad group policy", Change: func(c *whatsapp.Config) { c.Enabled, c.GroupPolicy = false, "all" }},
	}
	common := func(c *whatsapp.Config) *channelconfig.Common { return &c.Common }
	adaptertest.Validate(t, ok, append(adaptertest.CommonConfigCases("whatsapp", common), own...))
}

// TestLiveMessagesWithinLimit: progress and tool hints go out as one
// message each, cut to Limit: the model's text is not bounded.
func TestLiveMessagesWithinLimit(t *testing.T) {
	cases := adaptertest.LiveCases(whatsapp.Limit)
	yes := true
	h := start(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendProgress: &yes, SendToolHints: &yes}}, adaptertest.LiveScript(cases))
	for i, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			h.fake.Emit(whatsapptest.DM(fmt.Sprintf("3EB0L%d", i), "15550001", strconv.Itoa(i)))
			got := h.fake.Next(t, wait).Msg.GetConversation()
			if got != tt.Want {
				t.Errorf("sent %d units ending %q; want %d ending %q", markup.Len(got), adaptertest.Tail(got), markup.Len(tt.Want), adaptertest.Tail(tt.Want))
			}
		})
	}
}
