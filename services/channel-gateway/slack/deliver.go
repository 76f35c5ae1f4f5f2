package slack

import (
	"context"
	"strings"

	"github.com/slack-go/slack"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Deliver posts one durable reply in its thread, split and rendered, then
// uploads its attachments there, continuing after the pieces an earlier
// attempt already sent.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	pieces := markup.SplitRendered(msg.GetContent(), markup.SlackLimit, maxText, shown)
	start, err := a.streams.Start(ctx, msg, len(pieces), a.sent)
	if err != nil {
		return err
	}
	err = a.sent.SendReply(ctx, msg.GetId(), start, pieces, msg.GetMedia(),
		func(ctx context.Context, _ int, piece string) error {
			return a.post(ctx, msg, markup.SlackMrkdwn(piece))
		},
		func(ctx context.Context, i int, m *nanofleetv1.MediaRef) error {
			return a.attach(ctx, msg, i, m)
		})
	if err != nil {
		return classify(err)
	}
	return nil
}

// DeliverLive posts progress and tool hints in the thread when enabled,
// deltas are followed by the streams themselves (see internal/editstream).
func (a *Adapter) DeliverLive(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	text, ok := a.cfg.LiveText(msg, a.deps.SendProgress, a.deps.SendToolHints, italic, hint)
	if !ok {
		return nil
	}
	return a.post(ctx, msg, text)
}

// hint shows a tool hint as code within maxText once escaped.
func hint(s string) string {
	return "`" + hintText(markup.TruncateRendered(s, maxText-2, hintLen)) + "`"
}

// hintText is a tool hint as Slack must get it inside backticks: a
// backtick would end the code span, and &, < and > are escaped as Slack
// requires of all text, so that a hint the model wrote (a tool's
// arguments) cannot mention <!channel> or show a link under another name.
func hintText(s string) string {
	return markup.EscapeSlack(strings.ReplaceAll(s, "`", "'"))
}

func hintLen(s string) int { return markup.Len(hintText(s)) }

// shown is how long Slack counts md once rendered: escaping &, < and >
// and padding tables can make it several times longer.
func shown(md string) int { return markup.Len(markup.SlackMrkdwn(md)) }

// italic shows progress in italics within maxText: cut on the Markdown but
// measured rendered, as rendering can make it several times longer.
func italic(md string) string {
	return "_" + markup.SlackMrkdwn(markup.TruncateRendered(md, maxText-2, shown)) + "_"
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
