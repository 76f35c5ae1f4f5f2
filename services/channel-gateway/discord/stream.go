package discord

import (
	"context"

	"github.com/disgoorg/disgo/discord"
	"github.com/disgoorg/disgo/rest"
	"github.com/disgoorg/snowflake/v2"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// streamer lets [editstream] post and edit Discord messages.
type streamer struct{ a *Adapter }

func (s streamer) Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, text string) (string, error) {
	id, err := s.a.post(ctx, msg, text, true, "", nil)
	return id, classify(err)
}

func (s streamer) Edit(ctx context.Context, msg *nanofleetv1.OutboundMessage, id, text string, _ bool) error {
	ch, mid, err := messageIDs(msg, id)
	if err != nil {
		return err
	}
	_, err = s.a.rest.UpdateMessage(ch, mid, discord.MessageUpdate{Content: &text}, rest.WithCtx(ctx))
	return classify(err)
}

func (s streamer) Delete(ctx context.Context, msg *nanofleetv1.OutboundMessage, id string) error {
	ch, mid, err := messageIDs(msg, id)
	if err != nil {
		return err
	}
	return s.a.rest.DeleteMessage(ch, mid, rest.WithCtx(ctx))
}

// messageIDs parses the channel of msg and the streamed message id.
func messageIDs(msg *nanofleetv1.OutboundMessage, id string) (ch, mid snowflake.ID, err error) {
	if ch, err = snowflake.Parse(msg.GetChatId()); err != nil {
		return 0, 0, err
	}
	if mid, err = snowflake.Parse(id); err != nil {
		return 0, 0, err
	}
	return ch, mid, nil
}
