package dingtalk

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/open-dingtalk/dingtalk-stream-sdk-go/chatbot"

	"github.com/nanofleet/nanofleet/pkg/observe"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/hold"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Channel is the channel name in subjects and session keys.
const Channel = "dingtalk"

// Limit is the longest piece of an answer, in UTF-16 code units, well
// inside a robot markdown message's limit.
const Limit = 4000

// Deps are what the adapter needs from its surroundings.
type Deps = adapterdeps.Deps

// Adapter is the DingTalk channel. It implements [gateway.LiveAdapter].
type Adapter struct {
	cfg   Config
	deps  Deps
	log   *slog.Logger
	api   string
	http  *http.Client
	media *media.Store
	// policy admits senders; its DM policy applies to direct messages
	// only (see access.Gate.Check), so groups and DMs share it.
	policy access.Policy
	// sent counts the pieces of each reply sent, fleet-wide: DingTalk has
	// no idempotency key to drop a piece sent twice.
	sent *parts.Store
	// streams is nil unless streaming into AI cards.
	streams *editstream.Streams
	now     func() time.Time

	mu      sync.Mutex
	token   string
	expires time.Time
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
		api:    cfg.apiURL(),
		http:   &http.Client{Timeout: time.Minute},
		policy: access.Policy{Channel: Channel, AllowFrom: cfg.AllowFrom, DM: cfg.DMPolicy},
		now:    time.Now,
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	var err error
	if a.media, err = media.Open(ctx, deps.Bus, cfg.MediaLimit(20<<20)); err != nil {
		return nil, fmt.Errorf("dingtalk: %w", err)
	}
	if a.sent, err = parts.Open(ctx, deps.Bus, parts.WithLogger(a.log)); err != nil {
		return nil, fmt.Errorf("dingtalk: %w", err)
	}
	switch {
	case cfg.Streaming && cfg.CardTemplateID != "":
		a.streams, err = editstream.New(ctx, editstream.Config{Channel: Channel, Interval: cfg.EditInterval(time.Second), Limit: Limit}, deps.Bus, cards{a}, editstream.WithLogger(a.log))
		if err != nil {
			return nil, fmt.Errorf("dingtalk: %w", err)
		}
	case cfg.Streaming:
		a.log.Warn("dingtalk: streaming needs channels.dingtalk.cardTemplateId (an AI card template); answers are sent whole")
	}
	return a, nil
}

// Channel returns "dingtalk".
func (a *Adapter) Channel() string { return Channel }

// Run holds the stream connection while this gateway holds the fleet's
// lease for the app, until ctx ends. The status board names the robot by
// its robot code, the name DingTalk's robot API knows it by.
func (a *Adapter) Run(ctx context.Context, in gateway.Inbox) error {
	stopStreams, err := a.streams.Watch(ctx)
	if err != nil {
		return err
	}
	defer stopStreams()
	return hold.Run(ctx, a.deps.Bus, hold.Key(Channel, a.api+"/"+a.cfg.ClientID), a.log, func(ctx context.Context) error {
		return a.connect(ctx, in)
	}, hold.WithAccount(a.cfg.robotCode()))
}

// content is the type-specific part of a robot message.
type content struct {
	DownloadCode        string `json:"downloadCode"`
	PictureDownloadCode string `json:"pictureDownloadCode"`
	FileName            string `json:"fileName"`
	Recognition         string `json:"recognition"`
	RichText            []struct {
		Text         string `json:"text"`
		Type         string `json:"type"`
		DownloadCode string `json:"downloadCode"`
	} `json:"richText"`
}

// file is a picture or file to download.
type file struct{ code, name string }

// onMessage applies the policies to one robot message and publishes it.
// Only a failure to publish is returned.
func (a *Adapter) onMessage(ctx context.Context, in gateway.Inbox, raw []byte) error {
	var m chatbot.BotCallbackDataModel
	if err := json.Unmarshal(raw, &m); err != nil {
		a.log.Warn("dropping malformed DingTalk robot message", "err", err, "raw", clip(raw))
		return nil
	}
	dm := m.ConversationType == "1"
	if m.MsgId == "" || m.ConversationId == "" || m.SenderStaffId == "" || (!dm && m.ConversationType != "2") {
		a.log.Warn("dropping DingTalk robot message without id, conversation, sender or type", "raw", clip(raw))
		return nil
	}
	text, files := a.text(&m)
	if !dm && !a.cfg.AdmitsGroup(m.IsInAtList, m.ConversationId) {
		return nil
	}
	// A one-to-one chat is addressed by the user's staff id (the send API
	// takes user ids), a group by its conversation id.
	chat := m.ConversationId
	if dm {
		chat = m.SenderStaffId
	}
	verdict, err := a.deps.Gate.Check(ctx, a.policy, access.Sender{
		ID: m.SenderStaffId, Aliases: nonEmpty(m.SenderId), Name: m.SenderNick, ChatID: chat, DM: dm,
	}, text)
	if err != nil {
		return fmt.Errorf("access check: %w", err)
	}
	if verdict != access.Allow {
		a.log.Debug("message not admitted", "chat", chat, "sender", m.SenderStaffId, "verdict", verdict)
		return nil
	}
	msg := &nanofleetv1.InboundMessage{
		Id: m.MsgId, Channel: Channel, ChatId: chat, SenderId: m.SenderStaffId, Content: text,
		Metadata: map[string]string{"conversation_type": m.ConversationType, "conversation_id": m.ConversationId},
	}
	if m.SessionWebhook != "" {
		msg.Metadata["session_webhook"] = m.SessionWebhook
		msg.Metadata["session_webhook_expires"] = strconv.FormatInt(m.SessionWebhookExpiredTime, 10)
	}
	if a.streams != nil {
		msg.Metadata["stream"] = "true" // asks the worker for deltas
	}
	for i, f := range files {
		ref, err := a.download(ctx, m.MsgId, i, f)
		if err != nil {
			a.log.Warn("dingtalk file download failed", "name", f.name, "err", err)
		}
		media.Attach(msg, f.name, ref, err)
	}
	if msg.Content == "" && len(msg.Media) == 0 {
		return nil
	}
	return in.Publish(ctx, msg)
}

// text returns a message's text and the files it carries.
func (a *Adapter) text(m *chatbot.BotCallbackDataModel) (string, []file) {
	if m.Msgtype == "text" || m.Msgtype == "" {
		return strings.TrimSpace(m.Text.Content), nil
	}
	var c content
	if m.Content != nil {
		data, _ := json.Marshal(m.Content) // decoded from JSON, so it encodes
		if err := json.Unmarshal(data, &c); err != nil {
			a.log.Warn("malformed DingTalk message content", "type", m.Msgtype, "err", err)
		}
	}
	switch m.Msgtype {
	case "picture":
		return "", []file{{code: cmp.Or(c.DownloadCode, c.PictureDownloadCode), name: "picture"}}
	case "file", "video":
		return "", []file{{code: c.DownloadCode, name: cmp.Or(c.FileName, m.Msgtype)}}
	case "audio":
		return strings.TrimSpace(c.Recognition), []file{{code: c.DownloadCode, name: "voice.amr"}}
	case "richText":
		var b strings.Builder
		var files []file
		for _, el := range c.RichText {
			if el.Type == "picture" || (el.Text == "" && el.DownloadCode != "") {
				files = append(files, file{code: el.DownloadCode, name: "picture"})
				continue
			}
			b.WriteString(el.Text)
		}
		return strings.TrimSpace(b.String()), files
	}
	return "[" + m.Msgtype + " message]", nil
}

// download asks for a file's URL and copies the file into the object
// store.
func (a *Adapter) download(ctx context.Context, msgID string, i int, f file) (*nanofleetv1.MediaRef, error) {
	if f.code == "" {
		return nil, errors.New("no download code")
	}
	var out struct {
		DownloadURL string `json:"downloadUrl"`
	}
	if err := a.call(ctx, "/v1.0/robot/messageFiles/download", map[string]string{"downloadCode": f.code, "robotCode": a.cfg.robotCode()}, &out); err != nil {
		return nil, err
	}
	if out.DownloadURL == "" {
		return nil, errors.New("no download URL")
	}
	object := fmt.Sprintf("dingtalk/%s/%d", msgID, i)
	return a.media.Fetch(ctx, a.http, out.DownloadURL, nil, object, f.name, "")
}

// Deliver sends one durable reply as markdown, split, continuing after
// the pieces an earlier attempt already sent, on this gateway or another
// (internal/parts): through the message's session webhook while it is
// valid, else (expired, or refused) through the robot send API.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	pieces := markup.Split(msg.GetContent(), Limit)
	start, err := a.streams.Start(ctx, msg, len(pieces), a.sent) // the streamed card may hold the first piece
	if err != nil {
		return err
	}
	// The attachments follow the text, counted as pieces after it.
	return a.sent.Send(ctx, msg.GetId(), start, len(pieces)+len(msg.GetMedia()), func(ctx context.Context, i int) error {
		if i < len(pieces) {
			return a.send(ctx, msg, "markdown", pieces[i])
		}
		return a.sendMedia(ctx, msg, msg.GetMedia()[i-len(pieces)])
	})
}

// DeliverLive sends progress and tool hints as text when enabled.
func (a *Adapter) DeliverLive(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	if !a.cfg.ShowsLive(msg.GetKind(), a.deps.SendProgress, a.deps.SendToolHints) {
		return nil
	}
	return a.send(ctx, msg, "text", msg.GetContent())
}

// webhookMargin is how long before its expiry a session webhook is no
// longer used, so that a send does not race the expiry.
const webhookMargin = 30 * time.Second

// send delivers one message of kind "markdown" or "text".
func (a *Adapter) send(ctx context.Context, msg *nanofleetv1.OutboundMessage, kind, md string) error {
	meta := msg.GetMetadata()
	if hook := meta["session_webhook"]; hook != "" {
		ms, _ := strconv.ParseInt(meta["session_webhook_expires"], 10, 64)
		if a.now().Add(webhookMargin).Before(time.UnixMilli(ms)) {
			err := a.webhook(ctx, hook, kind, md)
			var de *gateway.DeliveryError
			if err == nil || !errors.As(err, &de) || de.Retryable {
				return err
			}
			a.log.Info("session webhook refused, sending through the robot API", "err", err)
		}
	}
	return a.robot(ctx, msg.GetChatId(), kind, md)
}

// webhook posts to a message's session webhook.
func (a *Adapter) webhook(ctx context.Context, hook, kind, md string) error {
	var body map[string]any
	if kind == "text" {
		body = map[string]any{"msgtype": "text", "text": map[string]string{"content": md}}
	} else {
		body = map[string]any{"msgtype": "markdown", "markdown": map[string]string{"title": title(md), "text": md}}
	}
	data, _ := json.Marshal(body) // maps of strings always encode
	resp, raw, err := a.post(ctx, "session webhook", hook, "application/json", bytes.NewReader(data), nil)
	if err != nil {
		return err
	}
	var out oapiAnswer
	_ = json.Unmarshal(raw, &out)
	if resp.StatusCode == http.StatusOK && out.ErrCode == 0 {
		return nil
	}
	e := fmt.Errorf("dingtalk: session webhook: HTTP %d, errcode %d: %s", resp.StatusCode, out.ErrCode, out.ErrMsg)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || out.ErrCode == errSendTooFast:
		return gateway.Retry(e, max(retryAfter(resp.Header), sendTooFastWait))
	case resp.StatusCode >= 500:
		return gateway.Retry(e, 0)
	}
	return gateway.Permanent(e)
}

// oapiAnswer is how the older APIs (session webhooks, media upload)
// answer: errcode 0, or an error.
type oapiAnswer struct {
	ErrCode int    `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
}

// errSendTooFast is the webhook's rate-limit errcode (20 messages a
// minute per robot and chat); it names no wait, so the adapter waits
// sendTooFastWait.
const (
	errSendTooFast  = 130101
	sendTooFastWait = 3 * time.Second
)

// robot sends through the robot API: to a group by its conversation id,
// to a user by staff id.
func (a *Adapter) robot(ctx context.Context, chat, kind, md string) error {
	if kind == "text" {
		return a.robotSend(ctx, chat, "sampleText", map[string]string{"content": md})
	}
	return a.robotSend(ctx, chat, "sampleMarkdown", map[string]string{"title": title(md), "text": md})
}

// robotSend sends one robot message of template key with its parameters.
func (a *Adapter) robotSend(ctx context.Context, chat, key string, param map[string]string) error {
	p, _ := json.Marshal(param) // maps of strings always encode
	body := map[string]any{"robotCode": a.cfg.robotCode(), "msgKey": key, "msgParam": string(p)}
	path := "/v1.0/robot/oToMessages/batchSend"
	if strings.HasPrefix(chat, "cid") {
		path, body["openConversationId"] = "/v1.0/robot/groupMessages/send", chat
	} else {
		body["userIds"] = []string{chat}
	}
	var out struct {
		FlowControlled []string `json:"flowControlledStaffIdList"`
		Invalid        []string `json:"invalidStaffIdList"`
	}
	if err := a.call(ctx, path, body, &out); err != nil {
		return err
	}
	switch {
	case len(out.FlowControlled) > 0:
		return gateway.Retry(fmt.Errorf("dingtalk: robot send to %s flow-controlled", chat), sendTooFastWait)
	case len(out.Invalid) > 0:
		return gateway.Permanent(fmt.Errorf("dingtalk: robot send: invalid staff id %s", chat))
	}
	return nil
}

// apiError is an open API error answer.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("dingtalk: HTTP %d, %s: %s", e.Status, e.Code, e.Message)
}

// call posts body to an open API path with the app's access token and
// decodes the answer into out; errors are delivery errors.
func (a *Adapter) call(ctx context.Context, path string, body, out any) error {
	return a.callMethod(ctx, http.MethodPost, path, body, out)
}

// callMethod is call with another HTTP method.
func (a *Adapter) callMethod(ctx context.Context, method, path string, body, out any) error {
	tok, err := a.accessToken(ctx)
	if err != nil {
		return err
	}
	data, err := json.Marshal(body)
	if err != nil {
		return gateway.Permanent(fmt.Errorf("dingtalk: encode %s: %w", path, err))
	}
	resp, raw, err := a.request(ctx, method, path, a.api+path, "application/json", bytes.NewReader(data), http.Header{"X-Acs-Dingtalk-Access-Token": {tok}})
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			return gateway.Retry(fmt.Errorf("dingtalk: %s answer: %w", path, err), 0)
		}
		return nil
	}
	e := &apiError{Status: resp.StatusCode}
	_ = json.Unmarshal(raw, e)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || strings.Contains(e.Code, "QpsLimit") || strings.HasPrefix(e.Code, "Throttling"):
		return gateway.Retry(e, max(retryAfter(resp.Header), time.Second))
	case resp.StatusCode == http.StatusUnauthorized || e.Code == "InvalidAuthentication":
		a.mu.Lock()
		a.token = "" // fetched again on the retry
		a.mu.Unlock()
		return gateway.Retry(e, 0)
	case resp.StatusCode >= 500:
		return gateway.Retry(e, 0)
	}
	return gateway.Permanent(e)
}

// post sends body to url with header and returns the answer, read (at
// most 1 MiB) and closed; what names the call in errors, which are
// delivery errors (a transport failure is worth a retry).
func (a *Adapter) post(ctx context.Context, what, url, contentType string, body io.Reader, header http.Header) (*http.Response, []byte, error) {
	return a.request(ctx, http.MethodPost, what, url, contentType, body, header)
}

// request is post with another HTTP method.
func (a *Adapter) request(ctx context.Context, method, what, url, contentType string, body io.Reader, header http.Header) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, nil, gateway.Permanent(fmt.Errorf("dingtalk: %s: %w", what, err))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, nil, gateway.Retry(fmt.Errorf("dingtalk: %s: %w", what, err), 0)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, raw, nil
}

// accessToken returns the app's access token, fetching a new one when the
// cached one is within five minutes of expiry.
func (a *Adapter) accessToken(ctx context.Context) (string, error) {
	a.mu.Lock()
	if a.token != "" && a.now().Before(a.expires) {
		defer a.mu.Unlock()
		return a.token, nil
	}
	a.mu.Unlock()
	data, _ := json.Marshal(map[string]string{"appKey": a.cfg.ClientID, "appSecret": a.cfg.ClientSecret})
	resp, raw, err := a.post(ctx, "access token", a.api+"/v1.0/oauth2/accessToken", "application/json", bytes.NewReader(data), nil)
	if err != nil {
		return "", err
	}
	var out struct {
		AccessToken string `json:"accessToken"`
		ExpireIn    int64  `json:"expireIn"`
		Code        string `json:"code"`
		Message     string `json:"message"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		e := fmt.Errorf("dingtalk: access token: HTTP %d %s %s", resp.StatusCode, out.Code, out.Message)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return "", gateway.Retry(e, retryAfter(resp.Header))
		}
		return "", gateway.Permanent(e)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token = out.AccessToken
	a.expires = a.now().Add(time.Duration(out.ExpireIn)*time.Second - 5*time.Minute)
	return a.token, nil
}

// title is a markdown message's notification title: its first line as
// plain text, at most 20 characters.
func title(md string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(markup.Plain(md)), "\n")
	line = strings.TrimSpace(line)
	if utf8.RuneCountInString(line) > 20 {
		line = string([]rune(line)[:20]) + "…"
	}
	if line == "" {
		line = "reply"
	}
	return line
}

func retryAfter(h http.Header) time.Duration {
	if n, err := strconv.Atoi(h.Get("Retry-After")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
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
