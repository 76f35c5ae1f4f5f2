package whatsapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/hold"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp/kvstore"
)

// Channel is the channel name in subjects and session keys.
const Channel = "whatsapp"

// Limit is the longest piece of an answer in UTF-16 code units. WhatsApp
// has no documented limit (about 65,000 characters are accepted); 4000,
// as nanobot uses, keeps a piece readable on a phone.
const Limit = 4000

// Bucket is the short name of the KV bucket holding linked devices.
const Bucket = "whatsapp"

// Assets declares the bucket of linked devices for [bus.Provision].
func Assets(sp subject.Space, _ bus.Layout) bus.Assets {
	return bus.Assets{Buckets: []jetstream.KeyValueConfig{{
		Bucket: sp.Bucket(Bucket), Description: "linked WhatsApp devices (keys and Signal sessions)", History: 1,
	}}}
}

// quoteLen bounds the quoted text kept with an inbound message for the
// reply's quote preview.
const quoteLen = 200

// Deps are what the adapter needs from the gateway.
type Deps = adapterdeps.Deps

// Adapter is the WhatsApp channel. It implements [gateway.LiveAdapter].
type Adapter struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	dial    Dialer
	devices *kvstore.Container
	media   *media.Store
	board   *status.Board
	// policy admits senders; its DM policy applies to direct messages
	// only (see access.Gate.Check), so groups and DMs share it.
	policy access.Policy
	sent   *parts.Store
	// route is the core NATS subject on which the gateway holding the
	// connection sends for the others.
	route string

	mu   sync.Mutex
	conn Conn
	self []string // the account's own user ids (phone number, LID)
}

// Option changes an optional setting of [New].
type Option func(*Adapter) error

// WithLogger sets the adapter's logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(a *Adapter) error { a.log = observe.OrDiscard(l).With("channel", Channel); return nil }
}

// WithDialer replaces whatsmeow as the way to connect to WhatsApp (tests
// pass a fake).
func WithDialer(d Dialer) Option { return func(a *Adapter) error { a.dial = d; return nil } }

// New returns the adapter for cfg, which must be valid and enabled.
func New(ctx context.Context, cfg Config, deps Deps, opts ...Option) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Adapter{
		cfg: cfg, deps: deps, log: slog.New(slog.DiscardHandler),
		policy: access.Policy{Channel: Channel, AllowFrom: cfg.AllowFrom, DM: cfg.DMPolicy},
		route:  deps.Bus.Space.Prefix() + ".whatsapp.send." + cfg.account(),
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	if a.dial == nil {
		a.dial = whatsmeowDialer(a.log.With("component", "whatsmeow"))
	}
	kv, err := deps.Bus.KV(ctx, Bucket)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: %w", err)
	}
	if a.devices, err = kvstore.New(kv, cfg.account(), logger{a.log.With("component", "whatsmeow-store")}); err != nil {
		return nil, err
	}
	if a.media, err = media.Open(ctx, deps.Bus, cfg.MediaLimit(20<<20)); err != nil {
		return nil, fmt.Errorf("whatsapp: %w", err)
	}
	if a.sent, err = parts.Open(ctx, deps.Bus, parts.WithLogger(a.log)); err != nil {
		return nil, fmt.Errorf("whatsapp: %w", err)
	}
	if a.board, err = status.Open(ctx, deps.Bus); err != nil {
		return nil, fmt.Errorf("whatsapp: %w", err)
	}
	return a, nil
}

// Channel returns "whatsapp".
func (a *Adapter) Channel() string { return Channel }

// Run holds the WhatsApp connection while this gateway holds the fleet's
// lease for the account, until ctx ends.
func (a *Adapter) Run(ctx context.Context, in gateway.Inbox) error {
	return hold.Run(ctx, a.deps.Bus, hold.Key(Channel, a.cfg.account()), a.log, func(ctx context.Context) error {
		return a.connect(ctx, in)
	})
}

// connect loads the device from the fleet, connects it (linking it first
// when new), serves sends for the other gateways, and returns when the
// connection ends.
func (a *Adapter) connect(ctx context.Context, in gateway.Inbox) error {
	dev, err := a.devices.Device(ctx)
	if err != nil {
		return err
	}
	a.setSelf(dev.GetJID(), dev.GetLID())
	if dev.ID == nil {
		a.report(ctx, func(r *status.Record) { r.State, r.Reason, r.Account = status.Linking, "waiting for the QR code", "" })
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var told sync.Once
	// Events may come before dial returns (messages kept while offline);
	// they wait until the connection is set, which media downloads and
	// presence need.
	ready := make(chan struct{})
	conn, err := a.dial(ctx, dev, Handlers{
		Event: func(evt any) {
			select {
			case <-ready:
				a.onEvent(ctx, in, evt)
			case <-ctx.Done():
			}
		},
		QR: func(code string) {
			// A warning, once per connection: the channel cannot work
			// until someone scans a code.
			told.Do(func() {
				a.log.Warn("WhatsApp is not linked: run `nanofleet channels login whatsapp` or open the dashboard, and scan the QR code")
			})
			a.report(ctx, func(r *status.Record) { r.State, r.QR, r.Reason = status.Linking, code, "" })
		},
		Linked: func(id types.JID) {
			a.log.Info("WhatsApp linked", "account", id.User)
			a.setSelf(id, dev.GetLID())
			a.report(ctx, func(r *status.Record) { r.State, r.QR, r.Reason, r.Account = status.Connected, "", "", "+"+id.User })
		},
	})
	if err != nil {
		return err
	}
	if dev.ID != nil {
		a.report(ctx, func(r *status.Record) { r.State, r.QR, r.Reason, r.Account = status.Connected, "", "", "+"+dev.ID.User })
	}
	sub, err := a.deps.Bus.NC.Subscribe(a.route, func(m *nats.Msg) { a.serve(ctx, conn, m) })
	if err != nil {
		return fmt.Errorf("whatsapp: serve sends: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	a.mu.Lock()
	a.conn = conn
	a.mu.Unlock()
	close(ready)
	defer func() {
		a.mu.Lock()
		a.conn = nil
		a.mu.Unlock()
	}()
	select {
	case <-conn.Done():
	case <-ctx.Done():
		<-conn.Done()
	}
	err = conn.Err()
	if errors.Is(err, ErrLoggedOut) {
		// The old keys are worthless; the next connection links anew.
		if derr := a.devices.DeleteDevice(context.WithoutCancel(ctx), dev); derr != nil && !errors.Is(derr, kvstore.ErrNoID) {
			a.log.Warn("forget logged-out device", "err", derr)
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (a *Adapter) setSelf(ids ...types.JID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.self = a.self[:0]
	for _, id := range ids {
		if id.User != "" {
			a.self = append(a.self, id.User)
		}
	}
}

func (a *Adapter) isSelf(id types.JID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return id.User != "" && slices.Contains(a.self, id.User)
}

// report updates the channel's status record; a failure is only logged.
func (a *Adapter) report(ctx context.Context, f func(*status.Record)) {
	if err := a.board.Update(ctx, Channel, f); err != nil {
		a.log.Warn("report status", "err", err)
	}
}

// onEvent handles one whatsmeow event.
func (a *Adapter) onEvent(ctx context.Context, in gateway.Inbox, evt any) {
	switch e := evt.(type) {
	case *events.Message:
		a.onMessage(ctx, in, e)
	case *events.Connected:
		a.log.Info("WhatsApp connected")
	case *events.Disconnected:
		a.log.Warn("WhatsApp disconnected; whatsmeow reconnects")
	}
}

// attachment is a message's media to copy into the object store.
type attachment struct {
	msg        whatsmeow.DownloadableMessage
	name, mime string
	size       uint64
}

// onMessage applies the policies to one message and publishes it.
func (a *Adapter) onMessage(ctx context.Context, in gateway.Inbox, e *events.Message) {
	info := e.Info
	if e.Message == nil || info.ID == "" || info.Chat.IsEmpty() || info.Sender.IsEmpty() {
		a.log.Warn("dropping malformed WhatsApp message event", "id", info.ID, "chat", info.Chat.String(), "sender", info.Sender.String())
		return
	}
	if info.IsFromMe || info.Chat.Server == types.BroadcastServer {
		return // our own messages (echoed from other devices) and status updates
	}
	text, ctxInfo, files := content(e.Message)
	if info.IsGroup && !a.cfg.AdmitsGroup(a.mentioned(ctxInfo), info.Chat.String()) {
		return
	}
	sender := info.Sender.ToNonAD()
	var aliases []string
	if alt := info.SenderAlt; alt.User != "" {
		aliases = append(aliases, alt.User)
	}
	verdict, err := a.deps.Gate.Check(ctx, a.policy, access.Sender{
		ID: sender.User, Aliases: aliases, Name: info.PushName, ChatID: info.Chat.String(), DM: !info.IsGroup,
	}, text)
	if err != nil {
		a.log.Error("access check failed; message dropped", "id", info.ID, "err", err)
		return
	}
	if verdict != access.Allow {
		a.log.Debug("message not admitted", "chat", info.Chat.String(), "sender", sender.User, "verdict", verdict)
		return
	}
	msg := &nanofleetv1.InboundMessage{
		Id: info.ID, Channel: Channel, ChatId: info.Chat.String(), SenderId: sender.User, Content: text,
		Metadata: map[string]string{
			"sender":     sender.String(),
			"is_group":   fmt.Sprint(info.IsGroup),
			"push_name":  info.PushName,
			"quote_text": clip(markup.Plain(text), quoteLen),
		},
	}
	if q := ctxInfo.GetStanzaID(); q != "" {
		msg.Metadata["reply_to_id"] = q
		if quoted := quotedText(ctxInfo.GetQuotedMessage()); quoted != "" {
			msg.Content = "> " + strings.ReplaceAll(quoted, "\n", "\n> ") + "\n\n" + msg.Content
		}
	}
	for i, f := range files {
		ref, err := a.download(ctx, info.ID, i, f)
		if err != nil {
			a.log.Warn("whatsapp attachment not downloaded", "name", f.name, "err", err)
		}
		media.Attach(msg, f.name, ref, err)
	}
	if msg.Content == "" && len(msg.Media) == 0 {
		return
	}
	if err := a.publish(ctx, in, msg); err != nil {
		a.log.Error("whatsapp message not stored", "id", info.ID, "err", err)
		return
	}
	if c := a.current(); c != nil {
		if err := c.Composing(ctx, info.Chat, true); err != nil {
			a.log.Debug("composing presence", "err", err)
		}
	}
}

// publish stores msg, retrying a few times: WhatsApp does not send a
// message again, so a failure here would lose it.
func (a *Adapter) publish(ctx context.Context, in gateway.Inbox, msg *nanofleetv1.InboundMessage) error {
	wait := 200 * time.Millisecond
	var err error
	for range 5 {
		if err = in.Publish(ctx, msg); err == nil {
			return nil
		}
		a.log.Warn("publish WhatsApp message, retrying", "id", msg.GetId(), "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
	return err
}

// mentioned reports whether a group message addresses the account: a
// mention of it, or a reply to one of its messages.
func (a *Adapter) mentioned(ci *waE2E.ContextInfo) bool {
	for _, m := range ci.GetMentionedJID() {
		if id, err := types.ParseJID(m); err == nil && a.isSelf(id) {
			return true
		}
	}
	if p := ci.GetParticipant(); p != "" && ci.GetStanzaID() != "" {
		id, err := types.ParseJID(p)
		return err == nil && a.isSelf(id) // a reply to one of our messages
	}
	return false
}

// content returns a message's text, its context (mentions, quote) and
// its attachments.
func content(m *waE2E.Message) (string, *waE2E.ContextInfo, []attachment) {
	switch {
	case m.GetConversation() != "":
		return strings.TrimSpace(m.GetConversation()), nil, nil
	case m.GetExtendedTextMessage() != nil:
		x := m.GetExtendedTextMessage()
		return strings.TrimSpace(x.GetText()), x.GetContextInfo(), nil
	case m.GetImageMessage() != nil:
		x := m.GetImageMessage()
		return strings.TrimSpace(x.GetCaption()), x.GetContextInfo(), []attachment{{x, "image" + ext(x.GetMimetype()), x.GetMimetype(), x.GetFileLength()}}
	case m.GetAudioMessage() != nil:
		x := m.GetAudioMessage()
		name := "audio"
		if x.GetPTT() {
			name = "voice"
		}
		return "", x.GetContextInfo(), []attachment{{x, name + ext(x.GetMimetype()), x.GetMimetype(), x.GetFileLength()}}
	case m.GetDocumentMessage() != nil:
		x := m.GetDocumentMessage()
		name := x.GetFileName()
		if name == "" {
			name = "document" + ext(x.GetMimetype())
		}
		return strings.TrimSpace(x.GetCaption()), x.GetContextInfo(), []attachment{{x, name, x.GetMimetype(), x.GetFileLength()}}
	case m.GetVideoMessage() != nil:
		x := m.GetVideoMessage()
		return strings.TrimSpace(x.GetCaption()), x.GetContextInfo(), []attachment{{x, "video" + ext(x.GetMimetype()), x.GetMimetype(), x.GetFileLength()}}
	case m.GetStickerMessage() != nil:
		x := m.GetStickerMessage()
		return "", x.GetContextInfo(), []attachment{{x, "sticker.webp", x.GetMimetype(), x.GetFileLength()}}
	}
	return "", nil, nil
}

func quotedText(m *waE2E.Message) string {
	if m == nil {
		return ""
	}
	text, _, files := content(m)
	if text == "" && len(files) > 0 {
		text = "[" + files[0].name + "]"
	}
	return clip(text, quoteLen)
}

// ext is a file extension for the MIME types WhatsApp sends.
func ext(mime string) string {
	mime, _, _ = strings.Cut(mime, ";")
	switch mime {
	case "image/jpeg":
		return ".jpg"
	case "image/png":
		return ".png"
	case "image/webp":
		return ".webp"
	case "audio/ogg":
		return ".ogg"
	case "audio/mpeg":
		return ".mp3"
	case "audio/mp4":
		return ".m4a"
	case "video/mp4":
		return ".mp4"
	case "application/pdf":
		return ".pdf"
	}
	return ""
}

// download copies an attachment into the object store.
func (a *Adapter) download(ctx context.Context, msgID string, i int, f attachment) (*nanofleetv1.MediaRef, error) {
	if f.size > uint64(a.media.Limit()) {
		return nil, fmt.Errorf("%d bytes: %w", f.size, media.ErrTooLarge)
	}
	c := a.current()
	if c == nil {
		return nil, errors.New("not connected")
	}
	data, err := c.Download(ctx, f.msg)
	if err != nil {
		return nil, err
	}
	mime, _, _ := strings.Cut(f.mime, ";")
	return a.media.Put(ctx, fmt.Sprintf("whatsapp/%s/%d", msgID, i), f.name, mime, bytes.NewReader(data))
}

func (a *Adapter) current() Conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conn
}

// Deliver sends one durable reply as WhatsApp-formatted text, split on
// paragraph boundaries, continuing after the pieces an earlier attempt
// already sent. Only the gateway holding the connection can send: the
// others pass the reply to it over core NATS.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	if c := a.current(); c != nil {
		return a.deliver(ctx, c, msg)
	}
	return a.forward(ctx, msg)
}

// DeliverLive shows "typing…" for progress (and, when enabled, sends
// progress and tool hints as text).
func (a *Adapter) DeliverLive(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	if c := a.current(); c != nil {
		return a.deliverLive(ctx, c, msg)
	}
	return a.forward(ctx, msg)
}

func (a *Adapter) deliver(ctx context.Context, c Conn, msg *nanofleetv1.OutboundMessage) error {
	chat, err := types.ParseJID(msg.GetChatId())
	if err != nil || chat.IsEmpty() {
		return gateway.Permanent(fmt.Errorf("whatsapp: chat id %q: not a JID", msg.GetChatId()))
	}
	pieces := markup.Split(msg.GetContent(), Limit)
	if strings.TrimSpace(msg.GetContent()) == "" {
		pieces = nil
	}
	// The pieces, then the attachments; a retry continues after the
	// last one sent.
	media := msg.GetMedia()
	start, err := a.sent.Sent(ctx, msg.GetId())
	if err != nil {
		return err
	}
	err = a.sent.Send(ctx, msg.GetId(), start, len(pieces)+len(media), func(ctx context.Context, i int) error {
		if i >= len(pieces) {
			return a.sendMedia(ctx, c, chat, media[i-len(pieces)])
		}
		if err := c.Send(ctx, chat, a.message(msg, i, markup.WhatsApp(pieces[i]))); err != nil {
			return sendError(err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if msg.GetLastOfTurn() || msg.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL || msg.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR {
		if err := c.Composing(ctx, chat, false); err != nil {
			a.log.Debug("paused presence", "err", err)
		}
	}
	return nil
}

func (a *Adapter) deliverLive(ctx context.Context, c Conn, msg *nanofleetv1.OutboundMessage) error {
	chat, err := types.ParseJID(msg.GetChatId())
	if err != nil {
		return nil
	}
	send := a.cfg.ShowsLive(msg.GetKind(), a.deps.SendProgress, a.deps.SendToolHints)
	if send && strings.TrimSpace(msg.GetContent()) != "" {
		if err := c.Send(ctx, chat, &waE2E.Message{Conversation: proto.String(markup.WhatsApp(msg.GetContent()))}); err != nil {
			return err
		}
	}
	// Any live message means the turn is still running.
	return c.Composing(ctx, chat, true)
}

// message is piece i of a reply. In groups the first piece quotes the
// message it answers, so that the answer is found among others; in a
// direct chat a quote would only add noise.
func (a *Adapter) message(msg *nanofleetv1.OutboundMessage, i int, text string) *waE2E.Message {
	meta := msg.GetMetadata()
	if i > 0 || msg.GetReplyTo() == "" || meta["is_group"] != "true" {
		return &waE2E.Message{Conversation: proto.String(text)}
	}
	return &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text: proto.String(text),
		ContextInfo: &waE2E.ContextInfo{
			StanzaID:      proto.String(msg.GetReplyTo()),
			Participant:   proto.String(meta["sender"]),
			QuotedMessage: &waE2E.Message{Conversation: proto.String(meta["quote_text"])},
		},
	}}
}

// sendMedia uploads an attachment from the object store and sends it as
// the message kind its MIME type calls for. An attachment that cannot be
// read (gone, too large) is logged and skipped: retrying would not help.
func (a *Adapter) sendMedia(ctx context.Context, c Conn, chat types.JID, ref *nanofleetv1.MediaRef) error {
	data, err := a.media.Get(ctx, ref.GetObject())
	if err != nil {
		a.log.Warn("whatsapp attachment not sent", "object", ref.GetObject(), "err", err)
		return nil
	}
	mime := ref.GetMimeType()
	if mime == "" {
		mime = "application/octet-stream"
	}
	kind := whatsmeow.MediaDocument
	switch {
	case strings.HasPrefix(mime, "image/"):
		kind = whatsmeow.MediaImage
	case strings.HasPrefix(mime, "audio/"):
		kind = whatsmeow.MediaAudio
	case strings.HasPrefix(mime, "video/"):
		kind = whatsmeow.MediaVideo
	}
	up, err := c.Upload(ctx, data, kind)
	if err != nil {
		return gateway.Retry(fmt.Errorf("whatsapp: upload %s: %w", ref.GetName(), err), 0)
	}
	var m waE2E.Message
	switch kind {
	case whatsmeow.MediaImage:
		m.ImageMessage = &waE2E.ImageMessage{URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: &up.FileLength, Mimetype: &mime}
	case whatsmeow.MediaAudio:
		m.AudioMessage = &waE2E.AudioMessage{URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: &up.FileLength, Mimetype: &mime,
			PTT: proto.Bool(strings.HasPrefix(mime, "audio/ogg"))} // Opus in Ogg is how voice notes travel
	case whatsmeow.MediaVideo:
		m.VideoMessage = &waE2E.VideoMessage{URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: &up.FileLength, Mimetype: &mime}
	default:
		name := ref.GetName()
		m.DocumentMessage = &waE2E.DocumentMessage{URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: &up.FileLength, Mimetype: &mime,
			FileName: &name, Title: &name}
	}
	if err := c.Send(ctx, chat, &m); err != nil {
		return sendError(err)
	}
	return nil
}

// sendError classifies a whatsmeow send error: the recipient forms it
// refuses are permanent, rate limits wait, the rest is retried.
func sendError(err error) error {
	switch {
	case errors.Is(err, whatsmeow.ErrRecipientADJID), errors.Is(err, whatsmeow.ErrUnknownServer), errors.Is(err, whatsmeow.ErrBroadcastListUnsupported):
		return gateway.Permanent(fmt.Errorf("whatsapp: send: %w", err))
	case errors.Is(err, whatsmeow.ErrIQRateOverLimit):
		return gateway.Retry(fmt.Errorf("whatsapp: send: %w", err), 5*time.Second)
	}
	return gateway.Retry(fmt.Errorf("whatsapp: send: %w", err), 0)
}

// routed is the answer to a send passed to the connection's holder.
type routed struct {
	Err        string        `json:"err,omitempty"`
	Retryable  bool          `json:"retryable,omitempty"`
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
}

// notHeldWait is how long a reply waits when no gateway holds the
// connection (one is taking over, or the account is being linked).
const notHeldWait = 2 * time.Second

// forward passes a reply to the gateway holding the connection.
func (a *Adapter) forward(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	data, err := proto.Marshal(msg)
	if err != nil {
		return gateway.Permanent(fmt.Errorf("whatsapp: encode reply: %w", err))
	}
	resp, err := a.deps.Bus.NC.RequestWithContext(ctx, a.route, data)
	if err != nil {
		return gateway.Retry(fmt.Errorf("whatsapp: no gateway holds the connection: %w", err), notHeldWait)
	}
	var r routed
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return gateway.Retry(fmt.Errorf("whatsapp: answer of the connection's holder: %w", err), 0)
	}
	if r.Err == "" {
		return nil
	}
	e := fmt.Errorf("whatsapp: via the connection's holder: %s", r.Err)
	if r.Retryable {
		return gateway.Retry(e, r.RetryAfter)
	}
	return gateway.Permanent(e)
}

// serve sends a reply passed by another gateway.
func (a *Adapter) serve(ctx context.Context, c Conn, m *nats.Msg) {
	msg := &nanofleetv1.OutboundMessage{}
	var err error
	if uerr := proto.Unmarshal(m.Data, msg); uerr != nil {
		err = gateway.Permanent(fmt.Errorf("decode reply: %w", uerr))
	} else {
		switch msg.GetKind() {
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT, nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA:
			err = a.deliverLive(ctx, c, msg)
		default:
			err = a.deliver(ctx, c, msg)
		}
	}
	var r routed
	if err != nil {
		r.Err, r.Retryable = err.Error(), true
		var de *gateway.DeliveryError
		if errors.As(err, &de) {
			r.Retryable, r.RetryAfter = de.Retryable, de.RetryAfter
		}
	}
	data, _ := json.Marshal(r) // strings, bools and ints always encode
	if err := m.Respond(data); err != nil {
		a.log.Warn("answer a forwarded reply", "err", err)
	}
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
