package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

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
		Files       []file `json:"files"`
	} `json:"event"`
}

// file is a file shared in a message.
type file struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Mimetype string `json:"mimetype"`
	Size     int64  `json:"size"`
	URL      string `json:"url_private_download"`
}

func (f file) FileName() string { return f.Name }

// publishWait bounds the tries to store one event.
const publishWait = time.Minute

// onEvent applies the policies to one event and publishes it.
func (a *Adapter) onEvent(ctx context.Context, in gateway.Inbox, payload json.RawMessage) error {
	var ev event
	if err := json.Unmarshal(payload, &ev); err != nil {
		a.log.Warn("dropping malformed Slack event", "err", err, "raw", observe.Excerpt(payload))
		return nil
	}
	e := ev.Event
	if e.Type != "message" && e.Type != "app_mention" {
		return nil
	}
	if ev.EventID == "" || e.Channel == "" || e.User == "" || e.TS == "" {
		a.log.Warn("dropping Slack event without id, channel, user or ts", "event_id", ev.EventID, "raw", observe.Excerpt(payload))
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
	ok, err := a.deps.Gate.Admit(ctx, a.log, policy, access.Sender{ID: e.User, ChatID: e.Channel, DM: dm}, text)
	if err != nil {
		return fmt.Errorf("access check: %w", err)
	}
	if !ok {
		return nil
	}
	thread := e.ThreadTS
	if thread == "" && !dm && channelconfig.On(a.cfg.ReplyInThread, true) {
		thread = e.TS
	}
	// is_group tells memory a channel from a private chat (memory.IsGroup):
	// app_mention events carry no channel_type.
	meta := map[string]string{"ts": e.TS, "channel_type": e.ChannelType, metakey.IsGroup: fmt.Sprint(!dm)}
	if a.cfg.Streaming {
		meta[metakey.Stream] = "true" // asks the worker for deltas
	}
	if thread != "" {
		meta["thread_ts"] = thread
	}
	msg := &nanofleetv1.InboundMessage{
		Id: ev.EventID, Channel: Channel, ChatId: e.Channel, SenderId: e.User,
		Content: text, Metadata: meta,
	}
	if !dm && thread != "" {
		// A thread is a conversation of its own, as in nanobot:
		// "slack:<channel>:<thread ts>".
		msg.SessionKey = session.Key(Channel, e.Channel+":"+thread)
	}
	// A file Slack gives no download URL for is skipped, without a note.
	files := slices.DeleteFunc(e.Files, func(f file) bool { return f.URL == "" })
	if !media.AttachAll(ctx, a.log, msg, files, func(ctx context.Context, _ int, f file) (*nanofleetv1.MediaRef, error) {
		return a.download(ctx, e.Channel, ev.EventID, f)
	}) {
		return nil
	}
	// The envelope is acknowledged already: Slack will not send the event
	// again, so a transient failure is tried again here.
	if err := gateway.PublishWithin(ctx, in, msg, publishWait, func(err error, wait time.Duration) {
		a.log.Warn("publish Slack event, retrying", "event", ev.EventID, "err", err, "in", wait)
	}); err != nil {
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

// download copies a file shared in event eventID of channel into the
// object store.
func (a *Adapter) download(ctx context.Context, channel, eventID string, f file) (*nanofleetv1.MediaRef, error) {
	if !a.onAPIHost(f.URL) {
		return nil, fmt.Errorf("file URL %q is not on Slack's host", f.URL)
	}
	object := fmt.Sprintf("slack/%s/%s/%s", channel, eventID, f.ID)
	return a.media.Fetch(ctx, a.http, f.URL, http.Header{"Authorization": {"Bearer " + a.cfg.BotToken}}, object, f.Name, f.Mimetype)
}

// onAPIHost reports whether a file's URL is on the Web API's host or one
// of its subdomains (files.slack.com), with its scheme and port: the bot
// token goes with the download, and a remote file's URL is whatever the
// app that registered it gave.
func (a *Adapter) onAPIHost(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host, api := strings.ToLower(u.Hostname()), strings.ToLower(a.apiURL.Hostname())
	return u.Scheme == a.apiURL.Scheme && u.Port() == a.apiURL.Port() &&
		(host == api || strings.HasSuffix(host, "."+api))
}
