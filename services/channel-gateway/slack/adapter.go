package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/nanofleet/nanofleet/pkg/observe"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/retry"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// Channel is the channel name in subjects and session keys.
const Channel = "slack"

// Deps are what the adapter needs from its surroundings.
type Deps = adapterdeps.Deps

// Adapter is the Slack channel. It implements [gateway.LiveAdapter].
type Adapter struct {
	cfg       Config
	deps      Deps
	log       *slog.Logger
	api       *slack.Client
	http      *http.Client
	media     *media.Store
	groups    access.Policy
	dms       access.Policy
	pingEvery time.Duration

	sent    *parts.Store
	streams *editstream.Streams // nil unless streaming

	mu      sync.Mutex
	botID   string // the bot's user id, from auth.test
	botName string // "@name", for the status board
}

// Option tunes an adapter, mostly for tests.
type Option func(*Adapter) error

// WithLogger sets the adapter's logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(a *Adapter) error { a.log = observe.OrDiscard(l).With("channel", Channel); return nil }
}

// WithPingInterval sets how long Socket Mode may go without a ping from
// Slack before reconnecting (default 30s).
func WithPingInterval(d time.Duration) Option {
	return func(a *Adapter) error {
		if d < time.Second {
			return fmt.Errorf("slack: ping interval %s is below 1s", d)
		}
		a.pingEvery = d
		return nil
	}
}

// New returns the adapter for cfg, which must be valid and enabled.
func New(ctx context.Context, cfg Config, deps Deps, opts ...Option) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Adapter{
		cfg: cfg, deps: deps, log: slog.New(slog.DiscardHandler),
		http:      &http.Client{Timeout: 2 * time.Minute},
		pingEvery: 30 * time.Second,
		groups:    access.Policy{Channel: Channel, AllowFrom: cfg.AllowFrom, DM: access.DMAllowlist},
		dms: access.Policy{
			Channel:   Channel,
			AllowFrom: append(append([]string(nil), cfg.AllowFrom...), cfg.DM.AllowFrom...),
			DM:        cfg.DM.Policy,
		},
	}
	if !channelconfig.On(cfg.DM.Enabled, true) {
		a.dms.DM = access.DMDisabled
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	apiURL := cfg.APIURL
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	a.api = slack.New(cfg.BotToken,
		slack.OptionAppLevelToken(cfg.AppToken),
		slack.OptionAPIURL(apiURL),
		slack.OptionHTTPClient(a.http),
		slack.OptionLog(logAdapter{a.log}),
	)
	var err error
	if a.media, err = media.Open(ctx, deps.Bus, cfg.MediaLimit(20<<20)); err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	if a.sent, err = parts.Open(ctx, deps.Bus, parts.WithLogger(a.log)); err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	if cfg.Streaming {
		a.streams, err = editstream.New(ctx, editstream.Config{Channel: Channel, Interval: cfg.EditInterval(1200 * time.Millisecond), Limit: markup.SlackLimit}, deps.Bus, streamer{a}, editstream.WithLogger(a.log))
		if err != nil {
			return nil, fmt.Errorf("slack: %w", err)
		}
	}
	return a, nil
}

// Channel returns "slack".
func (a *Adapter) Channel() string { return Channel }

// Run holds a Socket Mode connection until ctx ends, reconnecting as Slack
// asks, and publishes the events that pass the policies.
func (a *Adapter) Run(ctx context.Context, in gateway.Inbox) error {
	if err := a.identify(ctx); err != nil {
		return err
	}
	// Slack spreads events over every Socket Mode connection of the app,
	// so every gateway connects and none holds a lease.
	if board, err := status.Open(ctx, a.deps.Bus); err == nil {
		board.Serving(ctx, a.log, Channel, a.botName)
	}
	stopStreams, err := a.streams.Watch(ctx)
	if err != nil {
		return err
	}
	defer stopStreams()
	sm := socketmode.New(a.api, socketmode.OptionPingInterval(a.pingEvery), socketmode.OptionLog(logAdapter{a.log}))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- sm.RunContext(ctx) }()
	for {
		select {
		case err := <-ran:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack socket mode: %w", err)
		case evt := <-sm.Events:
			a.dispatch(ctx, sm, in, evt)
		}
	}
}

// identify asks Slack for the bot's user id (for mentions), retrying
// until it answers or ctx ends.
func (a *Adapter) identify(ctx context.Context) error {
	return retry.Until(ctx, a.log, "slack auth.test failed, retrying", func(ctx context.Context) error {
		res, err := a.api.AuthTestContext(ctx)
		var se slack.SlackErrorResponse
		if errors.As(err, &se) && (se.Err == "invalid_auth" || se.Err == "not_authed" || se.Err == "token_revoked" || se.Err == "account_inactive") {
			return retry.Final(fmt.Errorf("slack: bot token rejected: %w", err))
		}
		if err != nil {
			return err
		}
		a.mu.Lock()
		a.botID, a.botName = res.UserID, "@"+res.User
		a.mu.Unlock()
		a.log.Info("slack bot ready", "user", res.User, "user_id", res.UserID, "team", res.Team)
		return nil
	})
}

func (a *Adapter) bot() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

// dispatch acknowledges an envelope first, then handles it.
func (a *Adapter) dispatch(ctx context.Context, sm *socketmode.Client, in gateway.Inbox, evt socketmode.Event) {
	switch evt.Type {
	case socketmode.EventTypeEventsAPI:
		if evt.Request == nil {
			return
		}
		if err := sm.AckCtx(ctx, evt.Request.EnvelopeID, nil); err != nil {
			a.log.Warn("slack ack failed", "envelope", evt.Request.EnvelopeID, "err", err)
		}
		if err := a.onEvent(ctx, in, evt.Request.Payload); err != nil && ctx.Err() == nil {
			a.log.Error("slack event not published", "envelope", evt.Request.EnvelopeID, "err", err)
		}
	case socketmode.EventTypeSlashCommand, socketmode.EventTypeInteractive:
		if evt.Request != nil {
			_ = sm.AckCtx(ctx, evt.Request.EnvelopeID, nil)
		}
	case socketmode.EventTypeErrorBadMessage:
		bad, _ := evt.Data.(*socketmode.ErrorBadMessage)
		if bad == nil {
			return
		}
		a.log.Warn("dropping malformed Slack envelope", "err", bad.Cause, "raw", clip(bad.Message))
		var env struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(bad.Message, &env) == nil && env.EnvelopeID != "" {
			_ = sm.AckCtx(ctx, env.EnvelopeID, nil) // so Slack does not resend it
		}
	case socketmode.EventTypeConnected:
		a.log.Info("slack socket mode connected")
	case socketmode.EventTypeConnectionError:
		a.log.Warn("slack socket mode connection failed", "data", fmt.Sprint(evt.Data))
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("slack app token rejected")
	}
}

// event is the part of an Events API callback the adapter reads.
type event struct {
	EventID string `json:"event_id"`
	Event   struct {
		Type        string `json:"type"`
		Subtype     string `json:"subtype"`
		User        string `json:"user"`
		BotID       string `json:"bot_id"`
		Text        string `json:"text"`
		TS          string `json:"ts"`
		ThreadTS    string `json:"thread_ts"`
		Channel     string `json:"channel"`
		ChannelType string `json:"channel_type"`
		Files       []struct {
			ID       string `json:"id"`
			Name     string `json:"name"`
			Mimetype string `json:"mimetype"`
			Size     int64  `json:"size"`
			URL      string `json:"url_private_download"`
		} `json:"files"`
	} `json:"event"`
}

// onEvent applies the policies to one event and publishes it.
func (a *Adapter) onEvent(ctx context.Context, in gateway.Inbox, payload json.RawMessage) error {
	var ev event
	if err := json.Unmarshal(payload, &ev); err != nil {
		a.log.Warn("dropping malformed Slack event", "err", err, "raw", clip(payload))
		return nil
	}
	e := ev.Event
	if e.Type != "message" && e.Type != "app_mention" {
		return nil
	}
	if ev.EventID == "" || e.Channel == "" || e.User == "" || e.TS == "" {
		a.log.Warn("dropping Slack event without id, channel, user or ts", "event_id", ev.EventID, "raw", clip(payload))
		return nil
	}
	if (e.Subtype != "" && e.Subtype != "file_share") || e.BotID != "" || e.User == a.bot() {
		return nil // edits, joins, bots, ourselves
	}
	mention := "<@" + a.bot() + ">"
	dm := e.ChannelType == "im"
	if !dm {
		if e.Type == "message" && strings.Contains(e.Text, mention) {
			return nil // the app_mention event for the same message is used
		}
		if !a.cfg.AdmitsGroup(e.Type == "app_mention" || strings.Contains(e.Text, mention), e.Channel) {
			return nil
		}
	}
	text := strings.TrimSpace(strings.ReplaceAll(e.Text, mention, ""))
	policy := a.groups
	if dm {
		policy = a.dms
	}
	verdict, err := a.deps.Gate.Check(ctx, policy, access.Sender{ID: e.User, ChatID: e.Channel, DM: dm}, text)
	if err != nil {
		return fmt.Errorf("access check: %w", err)
	}
	if verdict != access.Allow {
		a.log.Debug("message not admitted", "chat", e.Channel, "sender", e.User, "verdict", verdict)
		return nil
	}
	thread := e.ThreadTS
	if thread == "" && !dm && channelconfig.On(a.cfg.ReplyInThread, true) {
		thread = e.TS
	}
	meta := map[string]string{"ts": e.TS, "channel_type": e.ChannelType}
	if a.cfg.Streaming {
		meta["stream"] = "true" // asks the worker for deltas
	}
	if thread != "" {
		meta["thread_ts"] = thread
	}
	msg := &nanofleetv1.InboundMessage{
		Id: ev.EventID, Channel: Channel, ChatId: e.Channel, SenderId: e.User,
		Content: text, Metadata: meta,
	}
	if !dm && thread != "" {
		msg.SessionKey = Channel + ":" + e.Channel + ":" + thread
	}
	for _, f := range e.Files {
		if f.URL == "" {
			continue
		}
		object := fmt.Sprintf("slack/%s/%s/%s", e.Channel, ev.EventID, f.ID)
		ref, err := a.media.Fetch(ctx, a.http, f.URL, http.Header{"Authorization": {"Bearer " + a.cfg.BotToken}}, object, f.Name, f.Mimetype)
		if err != nil {
			a.log.Warn("slack file download failed", "name", f.Name, "err", err)
		}
		media.Attach(msg, f.Name, ref, err)
	}
	if msg.Content == "" && len(msg.Media) == 0 {
		return nil
	}
	if err := in.Publish(ctx, msg); err != nil {
		return err
	}
	if emoji := a.cfg.ReactEmoji; emoji != "none" {
		if emoji == "" {
			emoji = "eyes"
		}
		if err := a.api.AddReactionContext(ctx, emoji, slack.NewRefToMessage(e.Channel, e.TS)); err != nil {
			a.log.Debug("slack reaction failed", "err", err)
		}
	}
	return nil
}

// Deliver posts one durable reply in its thread, split and rendered,
// continuing after the pieces an earlier attempt already posted.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	pieces := markup.Split(msg.GetContent(), markup.SlackLimit)
	start, err := a.streams.Start(ctx, msg, len(pieces), a.sent)
	if err != nil {
		return err
	}
	err = a.sent.Send(ctx, msg.GetId(), start, len(pieces), func(ctx context.Context, i int) error {
		return a.post(ctx, msg, markup.SlackMrkdwn(pieces[i]))
	})
	if err != nil {
		return classify(err)
	}
	if n := len(msg.GetMedia()); n > 0 {
		a.log.Warn("slack: outbound attachments are not uploaded", "id", msg.GetId(), "count", n)
	}
	return nil
}

// DeliverLive posts progress and tool hints in the thread when enabled,
// deltas are followed by the streams themselves (see internal/editstream).
func (a *Adapter) DeliverLive(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	if !a.cfg.ShowsLive(msg.GetKind(), a.deps.SendProgress, a.deps.SendToolHints) {
		return nil
	}
	var text string
	switch msg.GetKind() {
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS:
		text = "_" + markup.SlackMrkdwn(msg.GetContent()) + "_"
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT:
		text = "`" + strings.ReplaceAll(msg.GetContent(), "`", "'") + "`"
	default:
		return nil
	}
	return a.post(ctx, msg, text)
}

func (a *Adapter) post(ctx context.Context, msg *nanofleetv1.OutboundMessage, text string) error {
	_, err := a.postTS(ctx, msg, text)
	return err
}

// postTS is post returning the new message's ts.
func (a *Adapter) postTS(ctx context.Context, msg *nanofleetv1.OutboundMessage, text string) (string, error) {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if ts := msg.GetMetadata()["thread_ts"]; ts != "" {
		opts = append(opts, slack.MsgOptionTS(ts))
	}
	_, ts, err := a.api.PostMessageContext(ctx, msg.GetChatId(), opts...)
	return ts, err
}

// streamer lets [editstream] post and update Slack messages.
type streamer struct{ a *Adapter }

func (s streamer) Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, md string) (string, error) {
	ts, err := s.a.postTS(ctx, msg, markup.SlackMrkdwn(md))
	return ts, limited(err)
}

// limited marks Slack's 429 as a wait for the stream, not a failure.
func limited(err error) error {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return &editstream.RetryAfter{After: rl.RetryAfter, Err: err}
	}
	return err
}

func (s streamer) Delete(ctx context.Context, msg *nanofleetv1.OutboundMessage, ts string) error {
	_, _, err := s.a.api.DeleteMessageContext(ctx, msg.GetChatId(), ts)
	return err
}

func (s streamer) Edit(ctx context.Context, msg *nanofleetv1.OutboundMessage, ts, md string, _ bool) error {
	_, _, _, err := s.a.api.UpdateMessageContext(ctx, msg.GetChatId(), ts, slack.MsgOptionText(markup.SlackMrkdwn(md), false))
	return limited(err)
}

// transient are Slack error codes worth retrying.
var transient = map[string]bool{
	"ratelimited": true, "internal_error": true, "fatal_error": true,
	"service_unavailable": true, "request_timeout": true,
}

// classify turns a Web API error into a delivery error.
func classify(err error) error {
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	var sc slack.StatusCodeError
	switch {
	case errors.As(err, &rl):
		return gateway.Retry(err, rl.RetryAfter)
	case errors.As(err, &se):
		if transient[se.Err] {
			return gateway.Retry(err, 0)
		}
		return gateway.Permanent(err)
	case errors.As(err, &sc):
		if sc.Code >= 500 {
			return gateway.Retry(err, 0)
		}
		return gateway.Permanent(err)
	}
	return gateway.Retry(err, 0)
}

func clip(raw []byte) string {
	if len(raw) > 200 {
		return string(raw[:200]) + "…"
	}
	return string(raw)
}

// logAdapter sends slack-go's log lines to slog at debug level.
type logAdapter struct{ log *slog.Logger }

func (l logAdapter) Output(_ int, s string) error {
	l.log.Debug(strings.TrimSpace(s), "source", "slack-go")
	return nil
}
