package feishu

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/observe"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/hold"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/retry"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/webhook"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// Channel is the channel name in subjects and session keys.
const Channel = "feishu"

// Limit is the longest piece of an answer, in UTF-16 code units: a card
// or post request may be 30 KB, and a CJK character takes three bytes.
const Limit = 8000

// Deps are what the adapter needs from its surroundings.
type Deps = adapterdeps.Deps

// Adapter is the Feishu / Lark channel. It implements
// [gateway.LiveAdapter].
type Adapter struct {
	cfg    Config
	deps   Deps
	log    *slog.Logger
	base   string
	http   *http.Client
	api    *lark.Client
	events *dispatcher.EventDispatcher
	media  *media.Store
	// policy admits senders; its DM policy applies to direct messages
	// only (see access.Gate.Check), so groups and DMs share it.
	policy access.Policy
	sent   *parts.Store
	// streams is nil unless streaming.
	streams *editstream.Streams
	// nonces is nil unless in webhook mode.
	nonces jetstream.KeyValue

	hook webhook.Receiver // Run's inbox, for the webhook handler

	mu    sync.Mutex
	botID string // the bot's open id, for mentions
}

// Option changes an optional setting of [New].
type Option func(*Adapter) error

// WithLogger sets the adapter's logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(a *Adapter) error { a.log = observe.OrDiscard(l).With("channel", Channel); return nil }
}

// New returns the adapter for cfg, which must be valid and enabled.
func New(ctx context.Context, cfg Config, deps Deps, opts ...Option) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Adapter{
		cfg: cfg, deps: deps, log: slog.New(slog.DiscardHandler),
		base:   cfg.baseURL(),
		http:   &http.Client{Timeout: 2 * time.Minute},
		policy: access.Policy{Channel: Channel, AllowFrom: cfg.AllowFrom, DM: cfg.DMPolicy},
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	a.api = lark.NewClient(cfg.AppID, cfg.AppSecret,
		lark.WithOpenBaseUrl(a.base),
		lark.WithHttpClient(a.http),
		lark.WithLogger(logAdapter{a.log}),
		lark.WithLogLevel(larkcore.LogLevelDebug),
		lark.WithReqTimeout(30*time.Second),
	)
	a.events = dispatcher.NewEventDispatcher(cfg.VerificationToken, cfg.EncryptKey)
	a.events.InitConfig(larkevent.WithLogger(logAdapter{a.log}), larkevent.WithLogLevel(larkcore.LogLevelDebug))
	var err error
	if a.media, err = media.Open(ctx, deps.Bus, cfg.MediaLimit(20<<20)); err != nil {
		return nil, fmt.Errorf("feishu: %w", err)
	}
	if cfg.Mode == ModeWebhook {
		if a.nonces, err = deps.Bus.KV(ctx, bucketNonces); err != nil {
			return nil, fmt.Errorf("feishu: %w", err)
		}
	}
	if a.sent, err = parts.Open(ctx, deps.Bus, parts.WithLogger(a.log)); err != nil {
		return nil, fmt.Errorf("feishu: %w", err)
	}
	if cfg.Streaming {
		a.streams, err = editstream.New(ctx, editstream.Config{Channel: Channel, Interval: cfg.EditInterval(time.Second), Limit: Limit}, deps.Bus, streamer{a}, editstream.WithLogger(a.log))
		if err != nil {
			return nil, fmt.Errorf("feishu: %w", err)
		}
	}
	return a, nil
}

// Channel returns "feishu".
func (a *Adapter) Channel() string { return Channel }

// Webhook returns the path to serve [Adapter.WebhookHandler] on, in
// webhook mode.
func (a *Adapter) Webhook() (path string, ok bool) {
	if a.cfg.Mode != ModeWebhook {
		return "", false
	}
	return a.cfg.WebhookPath(), true
}

// Run receives events until ctx ends: in webhook mode through
// [Adapter.WebhookHandler], else over a long connection held while this
// gateway holds the fleet's lease for the app.
func (a *Adapter) Run(ctx context.Context, in gateway.Inbox) error {
	account, err := a.identify(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	stopStreams, err := a.streams.Watch(ctx)
	if err != nil {
		return err
	}
	defer stopStreams()
	a.hook.Serve(ctx, in)
	if a.cfg.Mode == ModeWebhook {
		a.log.Info("feishu events by webhook", "path", a.cfg.WebhookPath())
		if board, err := status.Open(ctx, a.deps.Bus); err == nil {
			board.Serving(ctx, a.log, Channel, account)
		}
		<-ctx.Done()
		return nil
	}
	return hold.Run(ctx, a.deps.Bus, hold.Key(Channel, a.base+"/"+a.cfg.AppID), a.log, func(ctx context.Context) error {
		return a.connect(ctx, in)
	}, hold.WithAccount(account))
}

// identify asks for the bot's open id (for mentions), retrying until the
// platform answers or ctx ends; rejected credentials are fatal. It returns
// the account to show on the status board: the app's name as Feishu shows
// it, or the open id when the app has none.
func (a *Adapter) identify(ctx context.Context) (account string, err error) {
	err = retry.Until(ctx, a.log, "feishu bot info failed, retrying", func(ctx context.Context) error {
		resp, err := a.api.Get(ctx, "/open-apis/bot/v3/info", nil, larkcore.AccessTokenTypeTenant)
		var ce larkcore.CodeError // the token endpoint's refusal
		if errors.As(err, &ce) && badCredentials[ce.Code] {
			return retry.Final(fmt.Errorf("feishu: app credentials rejected: %w", err))
		}
		if err != nil {
			return err
		}
		var info struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
			Bot  struct {
				OpenID  string `json:"open_id"`
				AppName string `json:"app_name"`
			} `json:"bot"`
		}
		if err := json.Unmarshal(resp.RawBody, &info); err != nil {
			return err
		}
		switch {
		case badCredentials[info.Code]:
			return retry.Final(fmt.Errorf("feishu: app credentials rejected: %d %s", info.Code, info.Msg))
		case info.Code != 0 || info.Bot.OpenID == "":
			return fmt.Errorf("bot info: %d %s", info.Code, info.Msg)
		}
		a.mu.Lock()
		a.botID = info.Bot.OpenID
		a.mu.Unlock()
		a.log.Info("feishu bot ready", "app", info.Bot.AppName, "open_id", info.Bot.OpenID)
		account = cmp.Or(info.Bot.AppName, info.Bot.OpenID)
		return nil
	})
	return account, err
}

// badCredentials are the token endpoint's answers to a wrong app id or
// secret.
var badCredentials = map[int]bool{10003: true, 10014: true}

func (a *Adapter) bot() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

// errPublish marks a failure to store an event: the platform should send
// it again.
var errPublish = errors.New("feishu: event not stored")

// handleEvent decodes one event payload (plain JSON) and handles it. Only
// a failure to publish is returned; anything malformed is logged and
// dropped.
func (a *Adapter) handleEvent(ctx context.Context, in gateway.Inbox, payload []byte) error {
	var ev larkim.P2MessageReceiveV1
	if err := json.Unmarshal(payload, &ev); err != nil {
		a.log.Warn("dropping malformed Feishu event", "err", err, "raw", clip(payload))
		return nil
	}
	if ev.EventV2Base == nil || ev.EventV2Base.Header == nil {
		a.log.Warn("dropping Feishu event without a header", "raw", clip(payload))
		return nil
	}
	if ev.EventV2Base.Header.EventType != "im.message.receive_v1" {
		a.log.Debug("ignoring Feishu event", "type", ev.EventV2Base.Header.EventType)
		return nil
	}
	if err := a.onMessage(ctx, in, ev.EventV2Base.Header.EventID, ev.Event); err != nil {
		return fmt.Errorf("%w: %w", errPublish, err)
	}
	return nil
}

// onMessage applies the policies to one received message and publishes
// it.
func (a *Adapter) onMessage(ctx context.Context, in gateway.Inbox, eventID string, ev *larkim.P2MessageReceiveV1Data) error {
	if ev == nil || ev.Message == nil || ev.Sender == nil || ev.Sender.SenderId == nil || eventID == "" {
		a.log.Warn("dropping Feishu message event without message, sender or id", "event_id", eventID)
		return nil
	}
	m, sender := ev.Message, ev.Sender
	chat, msgID, chatType := str(m.ChatId), str(m.MessageId), str(m.ChatType)
	user := str(sender.SenderId.OpenId)
	if chat == "" || msgID == "" || user == "" {
		a.log.Warn("dropping Feishu message without chat, message or sender id", "event_id", eventID)
		return nil
	}
	if str(sender.SenderType) == "app" || user == a.bot() {
		return nil
	}
	dm := chatType == "p2p"
	mentioned := false
	text, files := a.content(str(m.MessageType), str(m.Content))
	for _, mn := range m.Mentions {
		key := str(mn.Key)
		if mn.Id != nil && str(mn.Id.OpenId) == a.bot() && a.bot() != "" {
			mentioned = true
			text = strings.ReplaceAll(text, key, "")
		} else if key != "" {
			text = strings.ReplaceAll(text, key, "@"+str(mn.Name))
		}
	}
	text = strings.TrimSpace(text)
	if !dm && !a.cfg.AdmitsGroup(mentioned, chat) {
		return nil
	}
	verdict, err := a.deps.Gate.Check(ctx, a.policy, access.Sender{
		ID: user, Aliases: nonEmpty(str(sender.SenderId.UserId), str(sender.SenderId.UnionId)), ChatID: chat, DM: dm,
	}, text)
	if err != nil {
		return fmt.Errorf("access check: %w", err)
	}
	if verdict != access.Allow {
		a.log.Debug("message not admitted", "chat", chat, "sender", user, "verdict", verdict)
		return nil
	}
	msg := &nanofleetv1.InboundMessage{
		Id: eventID, Channel: Channel, ChatId: chat, SenderId: user, Content: text,
		Metadata: map[string]string{"message_id": msgID, "chat_type": chatType},
	}
	if t := str(m.ThreadId); t != "" {
		msg.Metadata["thread_id"] = t
	}
	if a.cfg.Streaming {
		msg.Metadata["stream"] = "true" // asks the worker for deltas
	}
	for i, f := range files {
		ref, err := a.download(ctx, msgID, eventID, i, f)
		if err != nil {
			a.log.Warn("feishu resource download failed", "name", f.name, "err", err)
		}
		media.Attach(msg, f.name, ref, err)
	}
	if msg.Content == "" && len(msg.Media) == 0 {
		return nil
	}
	return in.Publish(ctx, msg)
}

// resource is an image or file a message carries.
type resource struct {
	key, kind string // kind is "image" or "file", as the resource API takes it
	name      string
}

// content turns a message's content JSON into text and the resources to
// download. Unknown types become a short note rather than nothing.
func (a *Adapter) content(msgType, raw string) (string, []resource) {
	var c struct {
		Text     string `json:"text"`
		ImageKey string `json:"image_key"`
		FileKey  string `json:"file_key"`
		FileName string `json:"file_name"`
		Title    string `json:"title"`
		Content  [][]struct {
			Tag      string `json:"tag"`
			Text     string `json:"text"`
			Href     string `json:"href"`
			ImageKey string `json:"image_key"`
			UserName string `json:"user_name"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		a.log.Warn("malformed Feishu message content", "type", msgType, "err", err, "raw", clip([]byte(raw)))
		return "", nil
	}
	switch msgType {
	case "text":
		return c.Text, nil
	case "image":
		return "", []resource{{key: c.ImageKey, kind: "image", name: c.ImageKey}}
	case "file", "audio", "media":
		name := c.FileName
		if name == "" {
			name = c.FileKey
			if msgType == "audio" {
				name += ".opus"
			}
		}
		return "", []resource{{key: c.FileKey, kind: "file", name: name}}
	case "post":
		var b strings.Builder
		var files []resource
		if c.Title != "" {
			b.WriteString(c.Title + "\n")
		}
		for _, line := range c.Content {
			for _, el := range line {
				switch el.Tag {
				case "text", "md":
					b.WriteString(el.Text)
				case "a":
					fmt.Fprintf(&b, "[%s](%s)", el.Text, el.Href)
				case "at":
					b.WriteString("@" + el.UserName)
				case "img":
					files = append(files, resource{key: el.ImageKey, kind: "image", name: el.ImageKey})
				}
			}
			b.WriteString("\n")
		}
		return b.String(), files
	}
	return "[" + msgType + " message]", nil
}

// download copies a message's resource into the object store.
func (a *Adapter) download(ctx context.Context, msgID, eventID string, i int, f resource) (*nanofleetv1.MediaRef, error) {
	if f.key == "" {
		return nil, errors.New("no resource key")
	}
	resp, err := a.api.Im.V1.MessageResource.Get(ctx, larkim.NewGetMessageResourceReqBuilder().
		MessageId(msgID).FileKey(f.key).Type(f.kind).Build())
	if err != nil {
		return nil, err
	}
	if !resp.Success() || resp.File == nil {
		return nil, fmt.Errorf("resource %s: HTTP %d, code %d: %s", f.key, resp.StatusCode, resp.Code, resp.Msg)
	}
	// The message's own file name is the one the sender saw; images have
	// none, and their type is read from their bytes.
	name := f.name
	if name == "" {
		name = resp.FileName
	}
	object := fmt.Sprintf("feishu/%s/%d-%s", eventID, i, f.key)
	return a.media.Put(ctx, object, name, "", resp.File)
}

// Deliver sends one durable reply, split and rendered, continuing after
// the pieces an earlier attempt already sent. Each piece carries a uuid
// derived from the reply id, so the platform itself drops a piece sent
// twice (after a lost answer) within the hour.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	pieces := markup.Split(msg.GetContent(), Limit)
	start, err := a.streams.Start(ctx, msg, len(pieces), a.sent) // the streamed card may hold the first piece
	if err != nil {
		return err
	}
	return a.sent.Send(ctx, msg.GetId(), start, len(pieces)+len(msg.GetMedia()), func(ctx context.Context, i int) error {
		return a.sendPiece(ctx, msg, pieces, i)
	})
}

// sendPiece sends piece i of a reply: the pieces of its text, then its
// attachments, counted after them so that a retry continues with the
// first one not sent.
func (a *Adapter) sendPiece(ctx context.Context, msg *nanofleetv1.OutboundMessage, pieces []string, i int) error {
	if i < len(pieces) {
		return a.send(ctx, msg, a.cfg.ReplyFormat, pieces[i], pieceID(msg.GetId(), i))
	}
	return a.sendMedia(ctx, msg, msg.GetMedia()[i-len(pieces)], pieceID(msg.GetId(), i))
}

// DeliverLive sends progress and tool hints as text when enabled.
func (a *Adapter) DeliverLive(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	if !a.cfg.ShowsLive(msg.GetKind(), a.deps.SendProgress, a.deps.SendToolHints) {
		return nil
	}
	return a.send(ctx, msg, FormatText, msg.GetContent(), "")
}

// pieceID is the idempotency uuid of piece i of reply id (at most 50
// characters, as the API allows).
func pieceID(id string, i int) string {
	sum := sha256.Sum256([]byte(id + "#" + strconv.Itoa(i)))
	return hex.EncodeToString(sum[:16])
}

// body renders Markdown as a message of format: its msg_type and content.
func body(format, md string) (string, string) {
	var v any
	switch format {
	case FormatText:
		v = map[string]string{"text": markup.Plain(md)}
	case FormatPost:
		v = map[string]any{"zh_cn": map[string]any{"content": [][]map[string]string{{{"tag": "md", "text": md}}}}}
	default:
		format = "interactive"
		v = map[string]any{
			"config":   map[string]any{"wide_screen_mode": true, "update_multi": true},
			"elements": []map[string]string{{"tag": "markdown", "content": md}},
		}
	}
	data, _ := json.Marshal(v) // maps of strings always encode
	return format, string(data)
}

// send posts one message: a reply to the asking message when the reply
// carries its message_id, else a new message in the chat.
func (a *Adapter) send(ctx context.Context, msg *nanofleetv1.OutboundMessage, format, md, uuid string) error {
	_, err := a.sendID(ctx, msg, format, md, uuid)
	return err
}

// sendID is send returning the new message's id.
func (a *Adapter) sendID(ctx context.Context, msg *nanofleetv1.OutboundMessage, format, md, uuid string) (string, error) {
	msgType, content := body(format, md)
	return a.post(ctx, msg, msgType, content, uuid)
}

// post sends one message of msgType with its content JSON, as send does,
// and returns the new message's id.
func (a *Adapter) post(ctx context.Context, msg *nanofleetv1.OutboundMessage, msgType, content, uuid string) (string, error) {
	var resp *larkcore.ApiResp
	var code int
	var text, id string
	var err error
	if parent := msg.GetMetadata()["message_id"]; parent != "" {
		b := larkim.NewReplyMessageReqBodyBuilder().MsgType(msgType).Content(content)
		if uuid != "" {
			b = b.Uuid(uuid)
		}
		var r *larkim.ReplyMessageResp
		r, err = a.api.Im.V1.Message.Reply(ctx, larkim.NewReplyMessageReqBuilder().MessageId(parent).Body(b.Build()).Build())
		if r != nil {
			resp, code, text = r.ApiResp, r.Code, r.Msg
			if r.Data != nil {
				id = str(r.Data.MessageId)
			}
		}
	} else {
		b := larkim.NewCreateMessageReqBodyBuilder().ReceiveId(msg.GetChatId()).MsgType(msgType).Content(content)
		if uuid != "" {
			b = b.Uuid(uuid)
		}
		var r *larkim.CreateMessageResp
		r, err = a.api.Im.V1.Message.Create(ctx, larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").Body(b.Build()).Build())
		if r != nil {
			resp, code, text = r.ApiResp, r.Code, r.Msg
			if r.Data != nil {
				id = str(r.Data.MessageId)
			}
		}
	}
	return id, classify(resp, code, text, err)
}

// streamer lets [editstream] post and update the card of a streamed
// answer (update_multi cards can be patched).
type streamer struct{ a *Adapter }

func (s streamer) Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, md string) (string, error) {
	id, err := s.a.sendID(ctx, msg, FormatCard, md, "")
	if err == nil && id == "" {
		err = errors.New("feishu: no message id in the answer")
	}
	return id, err
}

func (s streamer) Edit(ctx context.Context, _ *nanofleetv1.OutboundMessage, id, md string, _ bool) error {
	_, content := body(FormatCard, md)
	r, err := s.a.api.Im.V1.Message.Patch(ctx, larkim.NewPatchMessageReqBuilder().MessageId(id).
		Body(larkim.NewPatchMessageReqBodyBuilder().Content(content).Build()).Build())
	if r != nil {
		return classify(r.ApiResp, r.Code, r.Msg, err)
	}
	return classify(nil, 0, "", err)
}

// Delete removes the card of a stream whose final update did not happen,
// so that the answer sent whole is the only one shown (a bot may delete
// the messages it sent).
func (s streamer) Delete(ctx context.Context, _ *nanofleetv1.OutboundMessage, id string) error {
	r, err := s.a.api.Im.V1.Message.Delete(ctx, larkim.NewDeleteMessageReqBuilder().MessageId(id).Build())
	if r != nil {
		return classify(r.ApiResp, r.Code, r.Msg, err)
	}
	return classify(nil, 0, "", err)
}

// Platform codes worth another try: rate limits, internal errors and
// token trouble the SDK fixes by fetching a new token.
var (
	rateLimited = map[int]bool{99991400: true, 230020: true, 11232: true}
	transient   = map[int]bool{1500: true, 99991661: true, 99991663: true, 99991664: true}
)

// classify turns an API outcome into nil or a delivery error.
func classify(resp *larkcore.ApiResp, code int, msg string, err error) error {
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return gateway.Permanent(fmt.Errorf("feishu: %w", err))
		}
		return gateway.Retry(fmt.Errorf("feishu: %w", err), retryAfter(resp))
	}
	if code == 0 && (resp == nil || resp.StatusCode < 400) {
		return nil
	}
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	e := fmt.Errorf("feishu: HTTP %d, code %d: %s", status, code, msg)
	switch {
	case rateLimited[code] || status == http.StatusTooManyRequests:
		return gateway.Retry(e, max(retryAfter(resp), time.Second))
	case transient[code] || status >= 500:
		return gateway.Retry(e, 0)
	}
	return gateway.Permanent(e)
}

// retryAfter reads the gateway's rate-limit reset header (seconds).
func retryAfter(resp *larkcore.ApiResp) time.Duration {
	if resp == nil {
		return 0
	}
	for _, h := range []string{"X-Ogw-Ratelimit-Reset", "Retry-After"} {
		if n, err := strconv.Atoi(resp.Header.Get(h)); err == nil && n > 0 {
			return time.Duration(n) * time.Second
		}
	}
	return 0
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func clip(raw []byte) string {
	if len(raw) > 200 {
		return string(raw[:200]) + "…"
	}
	return string(raw)
}

// logAdapter sends the SDK's log lines to slog at debug level; the
// adapter logs what matters itself.
type logAdapter struct{ log *slog.Logger }

func (l logAdapter) Debug(_ context.Context, args ...any) { l.out(args) }
func (l logAdapter) Info(_ context.Context, args ...any)  { l.out(args) }
func (l logAdapter) Warn(_ context.Context, args ...any)  { l.out(args) }
func (l logAdapter) Error(_ context.Context, args ...any) { l.out(args) }

func (l logAdapter) out(args []any) {
	l.log.Debug(strings.TrimSpace(fmt.Sprint(args...)), "source", "lark-sdk")
}
