package slack

import (
	"context"

	"github.com/slack-go/slack"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// streamer lets [editstream] post and update Slack messages.
type streamer struct{ a *Adapter }

func (s streamer) Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, md string) (string, error) {
	ts, err := s.a.postTS(ctx, msg, markup.SlackMrkdwn(md))
	return ts, classify(err)
}

func (s streamer) Delete(ctx context.Context, msg *nanofleetv1.OutboundMessage, ts string) error {
	_, _, err := s.a.api.DeleteMessageContext(ctx, msg.GetChatId(), ts)
	return err
}

func (s streamer) Edit(ctx context.Context, msg *nanofleetv1.OutboundMessage, ts, md string, _ bool) error {
	_, _, _, err := s.a.api.UpdateMessageContext(ctx, msg.GetChatId(), ts, slack.MsgOptionText(markup.SlackMrkdwn(md), false))
	return classify(err)
}
